// Trial processes and their metrics. A trial is a child process in its own process group (so
// pruning can stop the whole group: SIGTERM, then SIGKILL after a grace period) that the kernel
// sends SIGTERM when the study process dies (PR_SET_PDEATHSIG), so a killed study leaves no
// orphans; its stdout and stderr go to files in its run directory. MetricsTail reads a growing
// metrics.jsonl incrementally, only whole lines.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace xtrain::tune {

struct Command {
  std::vector<std::string> argv;                         // argv[0] looked up on PATH
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing) ours
};

// UsageError when argv[0] is neither an executable path nor found on PATH.
void check_executable(const std::string& program);

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();  // terminates a child still running

  // Starts the command; stdout/stderr are appended to the two files, stdin is /dev/null.
  static ChildProcess start(const Command& command, const std::string& stdout_path, const std::string& stderr_path);
  // Non-blocking; true once the child has exited (and been reaped).
  bool poll();
  // SIGTERM to the group, SIGKILL after `grace_seconds`; returns once the child is reaped.
  void terminate(double grace_seconds);

  bool running() const { return pid_ > 0 && !exited_; }
  pid_t pid() const { return pid_; }
  int exit_code() const { return exit_code_; }  // 128 + signal when killed by a signal
  std::string describe_exit() const;            // "exit code 3", "killed by signal 9 (Killed)"

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1, signal_ = 0;
};

class MetricsTail {
 public:
  // Values of the first of `keys` present in each line, keyed by the line's "step".
  MetricsTail(std::string path, std::vector<std::string> keys) : path_(std::move(path)), keys_(std::move(keys)) {}
  std::vector<std::pair<int64_t, double>> read_new();

 private:
  std::string path_;
  std::vector<std::string> keys_;
  int64_t offset_ = 0;
  std::string partial_;
};

// The last `max_bytes` of a file, starting at a line boundary ("" when unreadable).
std::string file_tail(const std::string& path, size_t max_bytes);

}  // namespace xtrain::tune
