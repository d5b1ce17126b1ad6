// spawn_process: argv/envp/paths built in the parent, output files opened there too (so a bad
// path is a clear error, not a silent child), then fork; the child only calls setpgid, prctl,
// sigaction, dup2, execve, write and _exit.
#include "xtrain/base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "xtrain/base/error.h"

extern char** environ;

namespace xtrain {
namespace {

bool is_executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<std::string> child_environment(const SpawnOptions& o) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    const bool set = std::any_of(o.env.begin(), o.env.end(), [&](const auto& p) { return p.first == key; });
    if (set || std::find(o.unset_env.begin(), o.unset_env.end(), key) != o.unset_env.end()) continue;
    out.push_back(kv);
  }
  for (const auto& [k, v] : o.env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Output files opened by the parent (close-on-exec; dup2 in the child clears that on 1 and 2).
struct ChildFds {
  int in = -1, out = -1, err = -1;
  bool close_out = false, close_err = false;
  ~ChildFds() {
    if (in >= 0) ::close(in);
    if (close_out) ::close(out);
    if (close_err) ::close(err);
  }
};

int open_output(const std::string& path, int fd, bool* owned) {
  *owned = !path.empty();
  if (path.empty()) return fd;
  const int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (f < 0) XTRAIN_USAGE_ERROR("cannot open ", path, " for a child process's output: ", std::strerror(errno));
  return f;
}

struct Prepared {
  std::string program, exec_error;
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
};

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const SpawnOptions& o, const Prepared& p, const ChildFds& fds, pid_t parent) {
  if (o.default_signals) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::sigaction(s, &dfl, nullptr);
  }
  if (o.new_process_group) ::setpgid(0, 0);
  if (o.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  }
  if (o.default_signals) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
  }
  if (fds.in >= 0) ::dup2(fds.in, 0);
  if (fds.out >= 0) ::dup2(fds.out, 1);
  if (fds.err >= 0) ::dup2(fds.err, 2);
  ::execve(p.program.c_str(), p.argv.data(), p.envp.data());
  (void)!::write(2, p.exec_error.data(), p.exec_error.size());
  ::_exit(127);
}

}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";  // an empty entry is "."
    if (is_executable(dir + "/" + name)) return dir + "/" + name;
    start = end + 1;
  }
  return "";
}

pid_t spawn_process(const SpawnOptions& o) {
  TORCH_INTERNAL_ASSERT(!o.argv.empty(), "spawn_process: empty argv");
  Prepared p;
  p.program = find_executable(o.argv[0]);
  if (p.program.empty()) p.program = o.argv[0];  // execve fails in the child: exit code 127
  p.exec_error = o.exec_error + ": " + o.argv[0] + "\n";
  p.args = o.argv;
  p.env = child_environment(o);
  p.argv = c_strings(p.args);
  p.envp = c_strings(p.env);
  ChildFds fds;
  fds.out = open_output(o.stdout_path, o.stdout_fd, &fds.close_out);
  fds.err = open_output(o.stderr_path, o.stderr_fd, &fds.close_err);
  fds.in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  sigset_t all, old;
  if (o.default_signals) {
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, &old);
  }
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(o, p, fds, parent);
  const int fork_errno = errno;
  if (o.default_signals) ::sigprocmask(SIG_SETMASK, &old, nullptr);
  TORCH_CHECK(pid >= 0, "cannot start ", o.argv[0], ": fork: ", std::strerror(fork_errno));
  if (o.new_process_group) ::setpgid(pid, pid);  // also here, so a signal sent right away reaches the group
  return pid;
}

ProcessExit decode_wait_status(int status) {
  ProcessExit e;
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
    e.code = 128 + e.signal;
  } else {
    e.code = WEXITSTATUS(status);
  }
  return e;
}

std::optional<ProcessExit> try_wait(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  if (r < 0) return ProcessExit{255, 0};
  return decode_wait_status(status);
}

ProcessExit wait_process(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return ProcessExit{255, 0};
  return decode_wait_status(status);
}

void kill_group(pid_t pid, int sig) {
  if (pid <= 0) return;
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

}  // namespace xtrain
