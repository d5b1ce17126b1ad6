// Benchmarks that need ranks start themselves: the parent process (no RANK in its environment)
// launches `nproc` copies of this program on loopback and returns their exit status.
#pragma once
#include <unistd.h>

#include <string>
#include <vector>

#include "xtrain/launch/launcher.h"

namespace xtrain::bench {

inline int launch_self(int nproc, std::vector<std::string> args) {
  launch::LaunchOptions o;
  o.nproc_per_node = nproc;
  o.master_port = 29400 + (::getpid() % 500);
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  o.program = std::string(buf, n > 0 ? n : 0);
  o.args = std::move(args);
  return launch::launch(o);
}

}  // namespace xtrain::bench
