// Starting and stopping child processes: one fork/exec for the launcher's ranks and tune's trials.
// Everything the child needs (argv, environment, resolved program path, output files) is prepared
// before fork, so the child runs only async-signal-safe calls until exec. POSIX/Linux only
// (PR_SET_PDEATHSIG); the caller owns the pid and reaps it with try_wait / wait_process.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xtrain {

struct SpawnOptions {
  std::vector<std::string> argv;                         // argv[0]: a path, or a name looked up on PATH
  std::vector<std::pair<std::string, std::string>> env;  // set on top of ours (replacing a same-named one)
  std::vector<std::string> unset_env;                    // removed from ours
  // The child's stdout / stderr: a file appended to (created 0644) when a path is given, else the
  // fd given (e.g. a pipe's write end; dup2'd), else ours. stdin is always /dev/null.
  std::string stdout_path, stderr_path;
  int stdout_fd = -1, stderr_fd = -1;
  bool new_process_group = true;  // the child leads its own group, so kill_group reaches its children
  int parent_death_signal = 0;    // PR_SET_PDEATHSIG: sent to the child when we die (0: none)
  // Block signals across fork and give the child default handlers before exec: for a parent that
  // installs its own handlers (a launcher), so a signal meant for the child never runs them there.
  bool default_signals = false;
  std::string exec_error = "cannot execute";  // the child writes "<exec_error>: <argv[0]>" and exits 127
};

// The path of an executable regular file: `name` itself when it contains '/', else the first match
// on $PATH (/usr/bin:/bin when unset); "" when there is none.
std::string find_executable(const std::string& name);

// fork + exec; returns the child's pid. UsageError when an output file cannot be opened,
// c10::Error when fork fails. A program that cannot be executed shows as exit code 127.
pid_t spawn_process(const SpawnOptions& options);

struct ProcessExit {
  int code = 0;    // the exit status, or 128 + signal
  int signal = 0;  // the signal that killed it, 0 when it exited
};
ProcessExit decode_wait_status(int status);
// Reaps `pid` if it has exited (WNOHANG); nullopt while it runs. A pid that is not our child
// (already reaped elsewhere) reads as exit code 255.
std::optional<ProcessExit> try_wait(pid_t pid);
ProcessExit wait_process(pid_t pid);  // blocks until `pid` exits

// Sends `sig` to pid's process group, or to pid alone when it leads none.
void kill_group(pid_t pid, int sig);

}  // namespace xtrain
