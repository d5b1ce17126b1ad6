// A group of rank processes supervised together: each child runs in its own process group and dies
// with the launcher (PR_SET_PDEATHSIG); its stdout/stderr come back through pipes and are written
// line by line with a "[rank N] " prefix; SIGINT/SIGTERM to the launcher are forwarded to every
// child (a second one sends SIGKILL). When one child fails (non-zero exit or a signal) the others
// get SIGTERM, then SIGKILL after a grace period; so do all when `watch` reports another node's
// failure. One poll loop, no threads.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace xtrain::launch {

struct ChildSpec {
  int rank = 0;
  std::vector<std::string> argv;            // argv[0]: a path, or a name looked up on PATH
  std::map<std::string, std::string> env;   // set on top of the launcher's environment
  std::vector<std::string> unset;           // removed from it
};

struct ChildExit {
  int rank = -1;
  int code = 0;     // exit status, or 128 + signal
  int signal = 0;   // the signal that killed it, 0 if it exited
  double seconds = 0;
};

struct GroupOutcome {
  bool interrupted = false;  // the launcher got SIGINT/SIGTERM/SIGHUP
  int interrupt_signal = 0;
  bool failed = false;       // some child failed first (not because we stopped it), or `watch` said stop
  ChildExit first_failure;   // rank -1 when `watch` stopped the group
  std::string stopped_because;  // what `watch` returned
  std::vector<ChildExit> exits;  // by rank order of `children`
};

struct GroupOptions {
  double grace_seconds = 10;  // SIGTERM -> SIGKILL
  int out_fd = 1;             // prefixed stdout lines go here
  int err_fd = 2;             // prefixed stderr lines go here
  // Asked about every 0.1 s while the ranks run: a reason to stop them all (another node is gone), or "".
  std::function<std::string()> watch;
};

GroupOutcome run_group(const std::vector<ChildSpec>& children, const GroupOptions& options);

// "exited with code 3", "was killed by SIGKILL".
std::string describe_exit(const ChildExit& e);

}  // namespace xtrain::launch
