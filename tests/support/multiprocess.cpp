// Spawning ranks of the test binary: base::spawn_process (base/subprocess.h) with output in a file,
// a polling try_wait loop and SIGKILL for ranks past the deadline.
#include "support/multiprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/paths.h"
#include "xtrain/base/subprocess.h"

namespace xtrain::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

bool is_worker() { return std::getenv("XTRAIN_TEST_WORKER") != nullptr; }
int worker_rank() { return std::atoi(worker_env("RANK", "0").c_str()); }
int worker_world_size() { return std::atoi(worker_env("WORLD_SIZE", "1").c_str()); }

std::string worker_env(const std::string& name, const std::string& fallback) {
  const char* v = std::getenv(name.c_str());
  return v ? std::string(v) : fallback;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("free_port: ") + std::strerror(errno));
  }
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::vector<std::string> self_test_argv(const std::string& test) {
  return {"/proc/self/exe", "--gtest_filter=" + test, "--gtest_color=no"};
}

Process Process::start(const std::vector<std::string>& argv, const Env& env, const std::string& output_path) {
  std::vector<std::string> args = argv;
  if (args[0] == "/proc/self/exe") {  // resolve now: the child's /proc/self is itself
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) args[0] = std::string(buf, n);
  }
  SpawnOptions o;
  o.argv = args;
  for (const auto& [k, v] : env) o.env.emplace_back(k, v);
  // A worker runs exactly its one test, whatever sharding or output the parent run uses.
  o.unset_env = {"GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "GTEST_OUTPUT", "GTEST_FILTER"};
  std::filesystem::remove(output_path);  // spawn_process appends: start the log afresh
  o.stdout_path = o.stderr_path = output_path;
  o.new_process_group = false;  // as a plain child: a signal to the test run's group reaches the ranks
  Process p;
  p.pid_ = spawn_process(o);
  p.output_path_ = output_path;
  return p;
}

Process::Process(Process&& o) noexcept { *this = std::move(o); }

Process& Process::operator=(Process&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(exit_code_, o.exit_code_);
  std::swap(output_path_, o.output_path_);
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && exit_code_ < 0) {
    ::kill(pid_, SIGKILL);
    wait_process(pid_);
  }
}

bool Process::wait(double timeout_s) {
  if (exit_code_ >= 0) return true;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (const auto exit = try_wait(pid_)) {
      exit_code_ = exit->code;
      return true;
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Process::signal(int sig) {
  if (pid_ > 0 && exit_code_ < 0) ::kill(pid_, sig);
}

std::string Process::output() const { return read_all(output_path_); }

std::vector<WorkerResult> run_workers(const std::string& test, const WorkerOptions& options) {
  const std::string dir = temp_dir("ranks");
  const std::string port = std::to_string(free_port());
  std::vector<Process> procs;
  for (int r = 0; r < options.world_size; ++r) {
    Env env = options.env;
    env["XTRAIN_TEST_WORKER"] = "1";
    env["RANK"] = std::to_string(r);
    env["LOCAL_RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(options.world_size);
    env["LOCAL_WORLD_SIZE"] = std::to_string(options.world_size);
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = port;
    if (auto it = options.rank_env.find(r); it != options.rank_env.end()) {
      for (const auto& [k, v] : it->second) env[k] = v;
    }
    procs.push_back(Process::start(self_test_argv(test), env, dir + "/rank" + std::to_string(r) + ".log"));
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(options.timeout_s);
  std::vector<WorkerResult> results(options.world_size);
  for (int r = 0; r < options.world_size; ++r) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    results[r].rank = r;
    if (!procs[r].wait(std::max(0.0, left))) {
      procs[r].signal(SIGKILL);
      procs[r].wait(10);
      results[r].timed_out = true;
    }
    results[r].exit_code = procs[r].exit_code();
    results[r].output = procs[r].output();
  }
  return results;
}

void expect_workers_ok(const std::vector<WorkerResult>& results) {
  for (const auto& r : results) {
    EXPECT_TRUE(r.exit_code == 0 && !r.timed_out)
        << "rank " << r.rank << (r.timed_out ? " timed out" : "") << " exited " << r.exit_code << "; output:\n"
        << r.output;
    // A worker whose test was filtered out or skipped would exit 0 without running anything.
    EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << "rank " << r.rank << " ran no test:\n"
                                                                        << r.output;
  }
}

void expect_workers_ok(const std::string& test, int world_size) {
  WorkerOptions o;
  o.world_size = world_size;
  expect_workers_ok(run_workers(test, o));
}

}  // namespace xtrain::testing
