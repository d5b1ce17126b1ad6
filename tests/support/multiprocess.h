// Several ranks on one machine: run one gtest of this very binary in N processes (posix_spawn of
// /proc/self/exe, never fork() after LibTorch's threads exist), with torchrun-style variables
// (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=<a free port>) and XTRAIN_TEST_WORKER=1.
// Worker tests call XTRAIN_WORKER_ONLY() first, so a normal test run skips them.
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#define XTRAIN_WORKER_ONLY()                                                           \
  do {                                                                                 \
    if (!::xtrain::testing::is_worker()) GTEST_SKIP() << "runs only as a spawned rank"; \
  } while (0)

namespace xtrain::testing {

using Env = std::map<std::string, std::string>;

bool is_worker();
int worker_rank();        // RANK
int worker_world_size();  // WORLD_SIZE
std::string worker_env(const std::string& name, const std::string& fallback = "");

int free_port();  // a TCP port on 127.0.0.1 nobody listened on a moment ago

struct WorkerResult {
  int rank = 0;
  int exit_code = -1;  // 128 + signal when killed
  bool timed_out = false;
  std::string output;  // stdout + stderr
};

struct WorkerOptions {
  int world_size = 2;
  double timeout_s = 60;  // then every rank still running is killed
  Env env;                // added to every rank
  std::map<int, Env> rank_env;  // added to one rank
};

// Runs `test` ("Suite.Name") as world_size ranks and waits for all of them.
std::vector<WorkerResult> run_workers(const std::string& test, const WorkerOptions& options);
// gtest expectation: every rank exited 0 (prints each failing rank's output otherwise).
void expect_workers_ok(const std::vector<WorkerResult>& results);
// Both at once, with default options: `test` as world_size ranks, each expected to exit 0.
void expect_workers_ok(const std::string& test, int world_size);

// One child process with its output in a file, for tests that signal it.
class Process {
 public:
  // argv[0] is a path; env is added to (or replaces) this process's environment.
  static Process start(const std::vector<std::string>& argv, const Env& env, const std::string& output_path);
  Process() = default;
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  ~Process();  // kills a child still running
  pid_t pid() const { return pid_; }
  bool wait(double timeout_s);  // true when it exited in time (then exit_code() is set)
  void signal(int sig);
  int exit_code() const { return exit_code_; }
  std::string output() const;

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string output_path_;
};

// Argv that runs one gtest of this binary.
std::vector<std::string> self_test_argv(const std::string& test);

}  // namespace xtrain::testing
