// launch(): plan the ranks, build each rank's command and environment, run the group, and restart
// it from the latest checkpoint on failure up to --max-restarts times, saying why each time.
#include "xtrain/launch/launcher.h"

#include <sched.h>
#include <unistd.h>

#include <c10/util/StringUtil.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/base/threads.h"
#include "xtrain/launch/child_group.h"
#include "xtrain/launch/peers.h"
#include "xtrain/launch/rank_plan.h"
#include "xtrain/launch/remote.h"

extern char** environ;

namespace xtrain::launch {
namespace fs = std::filesystem;
namespace {

// The launcher's own messages go where the ranks' stderr goes (one write per line).
void say(int fd, const std::string& message) {
  const std::string line = "launch: " + message + "\n";
  (void)!::write(fd, line.data(), line.size());
}

Env inherited_environment() {
  Env env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& name : threads::variables_set_by_reexec()) env.erase(name);
  env.erase("XTRAIN_LOADER_ENV_SET");
  return env;
}

int available_cores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string self_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  TORCH_CHECK(n > 0, "launch: cannot resolve /proc/self/exe: ", std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

bool is_python_script(const std::string& arg) {
  return arg.size() > 3 && arg.compare(arg.size() - 3, 3, ".py") == 0;
}

// `xtrain launch -- train.py ...`: the script runs under $XTRAIN_PYTHON, else Debian's
// /usr/bin/python3 (the interpreter with python3-torch), and finds `import xtrain` beside this
// program: <build>/python from a build tree, <prefix>/lib/python3/dist-packages when installed.
std::vector<std::string> python_command() {
  const fs::path bin = fs::path(self_executable()).parent_path();
  std::string path;
  for (const fs::path& dir : {bin / "python", bin.parent_path() / "lib" / "python3" / "dist-packages"}) {
    if (fs::exists(dir / "xtrain")) path += (path.empty() ? "" : ":") + dir.string();
  }
  const char* old = std::getenv("PYTHONPATH");
  if (old && *old) path += (path.empty() ? "" : ":") + std::string(old);
  if (!path.empty()) ::setenv("PYTHONPATH", path.c_str(), 1);  // the ranks inherit it
  const char* python = std::getenv("XTRAIN_PYTHON");
  return {python && *python ? python : "/usr/bin/python3"};
}

int nproc_of(const LaunchOptions& o) { return o.nproc_per_node > 0 ? o.nproc_per_node : 1; }

RankPlan make_plan(const LaunchOptions& o) {
  if (!o.hostfile.empty()) {
    XTRAIN_USAGE_CHECK(o.node_rank == 0, "launch: --node-rank is for one launcher per node; with --hostfile one",
                       " launcher starts every host");
    XTRAIN_USAGE_CHECK(o.max_nnodes == 0, "launch: --nnodes MIN:MAX is for one launcher per node (--node-rank); ",
                       "with --hostfile give --nnodes N");
    const auto nodes = select_slots(read_hostfile(o.hostfile), o.include, o.exclude, o.nnodes, o.nproc_per_node);
    return plan_hosts(nodes, o.master_addr, o.master_port);
  }
  XTRAIN_USAGE_CHECK(o.include.empty() && o.exclude.empty(), "launch: --include/--exclude need --hostfile");
  return plan_node(nproc_of(o), o.nnodes > 0 ? o.nnodes : 1, o.node_rank,
                   o.master_addr.empty() ? "127.0.0.1" : o.master_addr, o.master_port);
}

// One launcher per node on several nodes: the launchers know of each other (launch/peers.h).
bool uses_peers(const LaunchOptions& o) { return o.hostfile.empty() && (o.max_nnodes > 0 || o.nnodes > 1); }

std::unique_ptr<Peers> make_peers(const LaunchOptions& o) {
  if (!uses_peers(o)) return nullptr;
  XTRAIN_USAGE_CHECK(!o.master_addr.empty(), "launch: --nnodes ", o.nnodes, o.max_nnodes ? c10::str(":", o.max_nnodes) : "",
                     " needs --master-addr: the address of node 0 that every node can reach");
  XTRAIN_USAGE_CHECK(o.master_port < 65535, "launch: --master-port must be < 65535 with several nodes (the ",
                     "launchers' store listens on --master-port + 1), got ", o.master_port);
  XTRAIN_USAGE_CHECK(o.heartbeat_timeout > 0, "launch: --heartbeat-timeout must be > 0, got ", o.heartbeat_timeout);
  const int nodes = o.max_nnodes > 0 ? o.max_nnodes : o.nnodes;
  XTRAIN_USAGE_CHECK(o.node_rank < nodes, "launch: --node-rank ", o.node_rank, " must be in [0, ", nodes, ")");
  PeerOptions p;
  p.master_addr = o.master_addr;
  p.port = o.master_port + 1;
  p.host = o.node_rank == 0;
  p.timeout_seconds = o.heartbeat_timeout;
  p.heartbeat_seconds = std::min(0.5, o.heartbeat_timeout / 4);
  p.join_timeout_seconds = o.join_timeout;
  p.id = launcher_id();
  return std::make_unique<Peers>(p);
}

// The plan of the next start: one launcher for everything, a fixed node of several, or this node's
// place in an elastic round (nullopt: the run finished before this launcher could join).
std::optional<RankPlan> next_plan(const LaunchOptions& o, Peers* peers, int& round) {
  if (!peers) return make_plan(o);
  if (o.max_nnodes == 0) {
    const Membership m = peers->join_fixed(round, o.node_rank, o.nnodes);
    return plan_node(nproc_of(o), m.nnodes, m.node_rank, o.master_addr, o.master_port);
  }
  say(o.err_fd, c10::str("joining round ", round, " of the run (--nnodes ", o.nnodes, ":", o.max_nnodes,
                         "; node 0 closes each round)"));
  const auto m = peers->join_elastic(round, o.nnodes, o.max_nnodes);
  if (!m) return std::nullopt;
  round = m->round;
  return plan_node(nproc_of(o), m->nnodes, m->node_rank, o.master_addr, o.master_port);
}

// Variables a remote rank gets besides its rank variables (ssh does not carry our environment).
bool forwarded(const std::string& name) {
  for (const char* prefix : {"XTRAIN_", "OMP_", "GLOO_", "NCCL_", "OPENBLAS_", "MKL_", "CUDA_", "TORCH_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return name == "GLIBC_TUNABLES";
}

std::vector<ChildSpec> build_children(const RankPlan& plan, const std::vector<std::string>& command, int attempt) {
  const Env inherited = inherited_environment();
  const int cores = available_cores();
  std::vector<ChildSpec> out;
  for (const auto& slot : plan.ranks) {
    Env env = rank_environment(slot, plan, cores, inherited);
    // What OpenMP/OpenBLAS/glibc read when they load (base/threads.h), so ranks need no re-exec.
    for (auto& [k, v] : threads::loader_environment(std::max(1, std::atoi(env["OMP_NUM_THREADS"].c_str())))) {
      env.emplace(k, v);
    }
    env["XTRAIN_RESTART_COUNT"] = std::to_string(attempt);
    ChildSpec spec;
    spec.rank = slot.rank;
    if (attempt > 0) {  // inject a fault once
      spec.unset.push_back("XTRAIN_FAULT_AT_STEP");
      spec.unset.push_back("XTRAIN_FAULT_IN_SAVE");
    }
    if (slot.host.empty()) {
      spec.argv = command;
      spec.env = env;
    } else {
      std::vector<std::pair<std::string, std::string>> remote;
      for (const auto& [k, v] : inherited) {
        if (forwarded(k) && !env.count(k) && !(attempt > 0 && k.rfind("XTRAIN_FAULT_", 0) == 0)) remote.emplace_back(k, v);
      }
      for (const auto& kv : env) remote.push_back(kv);
      spec.argv = ssh_argv(slot.host, fs::current_path().string(), remote, command);
    }
    out.push_back(std::move(spec));
  }
  return out;
}

std::string describe_plan(const RankPlan& plan) {
  int remote = 0;
  for (const auto& r : plan.ranks) remote += !r.host.empty();
  return c10::str("starting ", plan.ranks.size(), " of ", plan.world_size, " ranks (", plan.nnodes,
                  plan.nnodes == 1 ? " node" : " nodes", remote ? c10::str(", ", remote, " over ssh") : std::string(),
                  "), master ", plan.master_addr, ":", plan.master_port);
}

}  // namespace

std::optional<std::string> output_dir_of(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--output" || args[i] == "-o") && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--output=", 0) == 0) return args[i].substr(9);
  }
  return std::nullopt;
}

std::vector<std::string> restart_args(const std::vector<std::string>& args, bool has_checkpoint) {
  std::vector<std::string> out = args;
  if (has_checkpoint && std::find(out.begin(), out.end(), "--resume") == out.end()) out.push_back("--resume");
  return out;
}

std::string latest_checkpoint(const std::string& run_dir) {
  std::ifstream in(fs::path(run_dir) / "checkpoints" / "latest");
  std::string tag;
  if (in) std::getline(in, tag);
  return tag;
}

namespace {

std::string membership_change(const RankPlan& before, const RankPlan& now) {
  if (before.nnodes == now.nnodes && before.ranks.front().node_rank == now.ranks.front().node_rank) return "";
  return c10::str("; the group re-formed: ", now.nnodes, now.nnodes == 1 ? " node" : " nodes", " (was ",
                  before.nnodes, "), world size ", now.world_size, " (was ", before.world_size, "), this is node ",
                  now.ranks.front().node_rank, " (was ", before.ranks.front().node_rank, ")");
}

std::string failure_reason(const GroupOutcome& outcome) {
  if (!outcome.stopped_because.empty()) return "stopped this node's ranks: " + outcome.stopped_because;
  const auto& f = outcome.first_failure;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", f.seconds);
  return c10::str("rank ", f.rank, " ", describe_exit(f), " after ", secs, " s");
}

}  // namespace

int launch(const LaunchOptions& o) {
  XTRAIN_USAGE_CHECK(!o.args.empty(), "launch: give the command after --, e.g. xtrain launch --nproc-per-node 2 --",
                     " train --config ds_config.json");
  XTRAIN_USAGE_CHECK(o.max_restarts >= 0, "launch: --max-restarts must be >= 0, got ", o.max_restarts);
  if (!uses_peers(o)) (void)make_plan(o);  // usage errors before anything starts
  const auto run_dir = output_dir_of(o.args);
  XTRAIN_USAGE_CHECK(o.max_restarts == 0 || run_dir, "launch: --max-restarts needs the train command's --output",
                     " RUN_DIR: a restart resumes from RUN_DIR/checkpoints/latest");
  std::vector<std::string> command{o.program.empty() ? self_executable() : o.program};
  if (o.program.empty() && is_python_script(o.args.front())) command = python_command();
  command.insert(command.end(), o.args.begin(), o.args.end());
  const auto peers = make_peers(o);
  int round = peers && o.max_nnodes > 0 ? peers->next_round() : 0;
  std::optional<RankPlan> previous;
  for (int attempt = 0;; ++attempt, ++round) {
    const auto plan = next_plan(o, peers.get(), round);
    if (!plan) {
      say(o.err_fd, "the run finished before a restart let this node join");
      return 0;
    }
    if (attempt == 0 && round > 0 && run_dir && !latest_checkpoint(*run_dir).empty()) {
      // A launcher that joins an elastic run in progress (a node that came back): its rank continues
      // the run from the checkpoint the others restart from, as a restarted rank does.
      const auto next = restart_args(o.args, true);
      command.resize(command.size() - o.args.size());
      command.insert(command.end(), next.begin(), next.end());
    }
    say(o.err_fd, describe_plan(*plan) + (previous ? membership_change(*previous, *plan) : std::string()));
    previous = plan;
    GroupOptions group{o.grace_seconds, o.out_fd, o.err_fd, nullptr};
    if (peers) group.watch = [&peers] { return peers->check(); };
    const auto outcome = run_group(build_children(*plan, command, attempt), group);
    if (outcome.interrupted) {
      if (peers) peers->report_failure("its launcher was interrupted");
      say(o.err_fd, c10::str("interrupted by SIG", ::sigabbrev_np(outcome.interrupt_signal), "; every rank stopped"));
      return 128 + outcome.interrupt_signal;
    }
    if (!outcome.failed) {
      if (peers) peers->finish();
      return 0;
    }
    const std::string why = failure_reason(outcome);
    if (peers) peers->report_failure(why);
    if (attempt >= o.max_restarts) {
      say(o.err_fd, why + (o.max_restarts ? c10::str("; no restarts left (--max-restarts ", o.max_restarts, ")")
                                          : std::string("; the other ranks were stopped")));
      return outcome.first_failure.rank >= 0 ? outcome.first_failure.code : 1;
    }
    const std::string tag = latest_checkpoint(*run_dir);
    say(o.err_fd, c10::str(why, "; the other ranks were stopped; restart ", attempt + 1, "/", o.max_restarts,
                           tag.empty() ? std::string(" from the start (no checkpoint yet)")
                                       : " from the latest checkpoint (" + tag + ")"));
    command.resize(1);
    const auto next = restart_args(o.args, !tag.empty());
    command.insert(command.end(), next.begin(), next.end());
  }
}

}  // namespace xtrain::launch
