// run_group: each rank started by base/subprocess.h (default signal handlers in the child, output
// into pipes, its own process group, SIGKILL when the launcher dies), a self-pipe for signals
// (SIGCHLD wakes the loop at once, so the first rank to die is reported as the cause, not the ranks
// that then fail talking to it), and one poll loop that prefixes output, reaps children and
// escalates SIGTERM to SIGKILL.
#include "xtrain/launch/child_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "xtrain/base/error.h"
#include "xtrain/base/subprocess.h"

namespace xtrain::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The signal handler's only output: a byte per signal into this pipe (write(2) is async-signal-safe).
int g_signal_pipe[2] = {-1, -1};
pid_t g_launcher_pid = -1;  // a forked child that has not reset its handlers yet must not write

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  if (::getpid() == g_launcher_pid) (void)!::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

class SignalScope {
 public:
  SignalScope() {
    TORCH_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, "launch: pipe: ", std::strerror(errno));
    g_launcher_pid = ::getpid();
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalScope() {
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int fd() const { return g_signal_pipe[0]; }

 private:
  struct sigaction old_[std::size(kSignals)];
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr read ends
  std::string pending[2];
  bool running = false;
  Clock::time_point started;
};

void check_program(const std::string& name) {
  XTRAIN_USAGE_CHECK(name.find('/') != std::string::npos || !find_executable(name).empty(), "launch: '", name,
                     "' is not on PATH");
}

Child spawn(const ChildSpec& spec) {
  int out[2], err[2];
  TORCH_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, "launch: pipe: ", std::strerror(errno));
  SpawnOptions o;
  o.argv = spec.argv;
  o.env.assign(spec.env.begin(), spec.env.end());
  o.unset_env = spec.unset;
  o.stdout_fd = out[1];
  o.stderr_fd = err[1];
  o.parent_death_signal = SIGKILL;
  o.default_signals = true;  // the launcher's own handlers must not run in a child before exec
  o.exec_error = "launch: cannot execute the rank's command";
  pid_t pid = -1;
  try {
    pid = spawn_process(o);
  } catch (...) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    throw;
  }
  ::close(out[1]);
  ::close(err[1]);
  Child c;
  c.rank = spec.rank;
  c.pid = pid;
  c.fds[0] = out[0];
  c.fds[1] = err[0];
  c.running = true;
  c.started = Clock::now();
  for (int fd : c.fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return c;
}

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Writes every complete line of `buf` with the rank prefix (one write per line); `flush` also the rest.
void emit_lines(std::string& buf, int rank, int fd, bool flush) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    size_t end = nl;
    if (end > start && buf[end - 1] == '\r') --end;  // ssh -tt writes CRLF
    write_all(fd, prefix + buf.substr(start, end - start) + "\n");
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    write_all(fd, prefix + buf + "\n");
    buf.clear();
  }
}

void signal_all(std::vector<Child>& kids, int sig) {
  for (auto& c : kids) {
    if (!c.running) continue;
    kill_group(c.pid, sig);
  }
}

}  // namespace

std::string describe_exit(const ChildExit& e) {
  if (e.signal == 0) return c10::str("exited with code ", e.code);
  const char* abbrev = ::sigabbrev_np(e.signal);
  return abbrev ? c10::str("was killed by SIG", abbrev) : c10::str("was killed by signal ", e.signal);
}

namespace {

class Supervisor {
 public:
  Supervisor(const std::vector<ChildSpec>& specs, const GroupOptions& options, int signal_fd)
      : options_(options), signal_fd_(signal_fd) {
    outcome_.exits.resize(specs.size());
    for (const auto& s : specs) {
      TORCH_CHECK(!s.argv.empty(), "launch: empty command for rank ", s.rank);
      check_program(s.argv[0]);  // every command resolves before any rank starts
    }
    try {
      for (const auto& s : specs) kids_.push_back(spawn(s));
    } catch (...) {
      signal_all(kids_, SIGKILL);
      for (auto& c : kids_) wait_process(c.pid);
      throw;
    }
  }

  GroupOutcome run() {
    Clock::time_point drain_until{};
    for (;;) {
      poll_once();
      reap();
      ask_watch();
      escalate();
      if (running() == 0) {
        if (drain_until == Clock::time_point{}) drain_until = Clock::now() + std::chrono::milliseconds(500);
        // Output still open after every child exited belongs to grandchildren: stop waiting soon.
        if (open_pipes() == 0 || Clock::now() > drain_until) break;
      }
    }
    for (auto& c : kids_) {
      for (int i = 0; i < 2; ++i) {
        emit_lines(c.pending[i], c.rank, i ? options_.err_fd : options_.out_fd, /*flush=*/true);
        if (c.fds[i] >= 0) ::close(c.fds[i]);
        c.fds[i] = -1;
      }
    }
    return outcome_;
  }

 private:
  int running() const { return static_cast<int>(std::count_if(kids_.begin(), kids_.end(), [](const Child& c) { return c.running; })); }
  int open_pipes() const {
    int n = 0;
    for (const auto& c : kids_) n += (c.fds[0] >= 0) + (c.fds[1] >= 0);
    return n;
  }

  void poll_once() {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<std::pair<size_t, int>> owner;  // (child, stream) of fds[1..]
    for (size_t k = 0; k < kids_.size(); ++k) {
      for (int i = 0; i < 2; ++i) {
        if (kids_[k].fds[i] < 0) continue;
        fds.push_back({kids_[k].fds[i], POLLIN, 0});
        owner.emplace_back(k, i);
      }
    }
    if (::poll(fds.data(), fds.size(), 100) <= 0) return;
    if (fds[0].revents) read_signals();
    for (size_t j = 1; j < fds.size(); ++j) {
      if (fds[j].revents) read_pipe(kids_[owner[j - 1].first], owner[j - 1].second);
    }
  }

  void read_pipe(Child& c, int stream) {
    char buf[65536];
    const ssize_t n = ::read(c.fds[stream], buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      ::close(c.fds[stream]);
      c.fds[stream] = -1;
      return;
    }
    c.pending[stream].append(buf, static_cast<size_t>(n));
    emit_lines(c.pending[stream], c.rank, stream ? options_.err_fd : options_.out_fd, /*flush=*/false);
  }

  void read_signals() {
    unsigned char sigs[64];
    const ssize_t n = ::read(signal_fd_, sigs, sizeof sigs);
    for (ssize_t i = 0; i < n; ++i) {
      const int sig = sigs[i];
      if (sig == SIGCHLD) continue;  // reap() runs next
      if (outcome_.interrupted) {
        signal_all(kids_, SIGKILL);  // a second Ctrl-C: no more waiting
        continue;
      }
      outcome_.interrupted = true;
      outcome_.interrupt_signal = sig;
      signal_all(kids_, sig == SIGHUP ? SIGTERM : sig);
      stop_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(options_.grace_seconds));
    }
  }

  void reap() {
    for (size_t k = 0; k < kids_.size(); ++k) {
      Child& c = kids_[k];
      if (!c.running) continue;
      const auto status = try_wait(c.pid);
      if (!status) continue;
      c.running = false;
      ChildExit e;
      e.rank = c.rank;
      e.signal = status->signal;
      e.code = status->code;
      e.seconds = std::chrono::duration<double>(Clock::now() - c.started).count();
      outcome_.exits[k] = e;
      if (e.code != 0 && !outcome_.failed && !outcome_.interrupted && !stopping_) {
        outcome_.failed = true;
        outcome_.first_failure = e;
        stop_all();
      }
    }
  }

  // Another node's failure (options_.watch) stops this node's ranks like a failing rank would.
  void ask_watch() {
    if (!options_.watch || stopping_ || outcome_.interrupted || running() == 0) return;
    const std::string why = options_.watch();
    if (why.empty()) return;
    outcome_.failed = true;
    outcome_.first_failure = ChildExit{-1, 1, 0, 0};
    outcome_.stopped_because = why;
    stop_all();
  }

  void stop_all() {
    stopping_ = true;
    signal_all(kids_, SIGTERM);
    stop_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.grace_seconds));
  }

  void escalate() {
    if ((stopping_ || outcome_.interrupted) && !killed_ && Clock::now() > stop_deadline_) {
      signal_all(kids_, SIGKILL);
      killed_ = true;
    }
  }

  GroupOptions options_;
  int signal_fd_;
  std::vector<Child> kids_;
  GroupOutcome outcome_;
  bool stopping_ = false, killed_ = false;
  Clock::time_point stop_deadline_{};
};

}  // namespace

GroupOutcome run_group(const std::vector<ChildSpec>& children, const GroupOptions& options) {
  SignalScope signals;
  Supervisor supervisor(children, options, signals.fd());
  return supervisor.run();
}

}  // namespace xtrain::launch
