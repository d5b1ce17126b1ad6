#include "xtrain/cli/stop_signal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <stdexcept>

namespace xtrain::cli {
namespace {

int g_stop_pipe[2] = {-1, -1};  // signal plumbing is process-wide by nature

extern "C" void on_stop_signal(int) {
  const char byte = 1;
  const ssize_t unused = ::write(g_stop_pipe[1], &byte, 1);  // async-signal-safe
  (void)unused;
}

}  // namespace

void install_stop_signal_handlers() {
  if (g_stop_pipe[0] < 0 && ::pipe2(g_stop_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("cannot create the signal pipe");
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (sig == SIGINT && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &action, nullptr);
  }
}

void wait_for_stop_signal() {
  char byte = 0;
  while (::read(g_stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
}

void raise_stop_signal() { on_stop_signal(0); }

}  // namespace xtrain::cli
