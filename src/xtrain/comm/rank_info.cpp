// rank_info_from_env: one reader per launcher convention. Slurm's master is the first host of the
// step's node list (rank 0 runs there); SLURM_LAUNCH_NODE_IPADDR is only a fallback because srun
// from a login node reports the login node.
#include "xtrain/comm/rank_info.h"

#include <c10/util/StringUtil.h>

#include <cstdlib>

#include "xtrain/base/error.h"

extern char** environ;

namespace xtrain::comm {
namespace {

const std::string* find(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int parse_int(const std::string& name, const std::string& value) {
  char* end = nullptr;
  const long parsed = std::strtol(value.c_str(), &end, 10);
  XTRAIN_USAGE_CHECK(end != value.c_str() && *end == '\0' && parsed >= 0 && parsed < (1L << 30),
                     "environment variable ", name, " must be a non-negative integer, got '", value, "'");
  return static_cast<int>(parsed);
}

int get_int(const EnvMap& env, const std::string& name, int fallback) {
  const std::string* v = find(env, name);
  return v ? parse_int(name, *v) : fallback;
}

std::string get_str(const EnvMap& env, const std::string& name, const std::string& fallback) {
  const std::string* v = find(env, name);
  return v ? *v : fallback;
}

void validate(const RankInfo& r, const std::string& rank_var, const std::string& world_var) {
  XTRAIN_USAGE_CHECK(r.world_size >= 1, "environment variable ", world_var, " must be >= 1, got ", r.world_size);
  XTRAIN_USAGE_CHECK(r.rank < r.world_size, "environment variable ", rank_var, "=", r.rank, " is not below ",
                     world_var, "=", r.world_size);
  XTRAIN_USAGE_CHECK(r.local_world_size >= 1 && r.local_rank < r.local_world_size, "local rank ", r.local_rank,
                     " is not below the local world size ", r.local_world_size, " (", r.source, " variables)");
  XTRAIN_USAGE_CHECK(r.master_port > 0 && r.master_port < 65536, "MASTER_PORT must be in 1..65535, got ",
                     r.master_port);
}

RankInfo from_torchrun(const EnvMap& env) {
  RankInfo r;
  r.source = "torchrun";
  r.rank = get_int(env, "RANK", 0);
  r.world_size = get_int(env, "WORLD_SIZE", 1);
  r.local_rank = get_int(env, "LOCAL_RANK", r.rank);
  r.local_world_size = get_int(env, "LOCAL_WORLD_SIZE", r.world_size);
  r.master_addr = get_str(env, "MASTER_ADDR", "127.0.0.1");
  r.master_port = get_int(env, "MASTER_PORT", kDefaultMasterPort);
  validate(r, "RANK", "WORLD_SIZE");
  return r;
}

RankInfo from_slurm(const EnvMap& env) {
  // sbatch's script itself has SLURM_PROCID=0 and the job's SLURM_NTASKS but is no task (no step id):
  // reading it as rank 0 of N would wait for ranks that never start.
  XTRAIN_USAGE_CHECK(find(env, "SLURM_STEP_ID") || find(env, "SLURM_STEPID") ||
                         get_int(env, "SLURM_NTASKS", get_int(env, "SLURM_NPROCS", 1)) <= 1,
                     "SLURM_PROCID is set without SLURM_STEP_ID: this is the batch script of a Slurm job with ",
                     get_str(env, "SLURM_NTASKS", get_str(env, "SLURM_NPROCS", "?")),
                     " tasks, not one of its tasks; start the ranks with srun (srun build/xtrain train ...)");
  RankInfo r;
  r.source = "slurm";
  r.rank = get_int(env, "SLURM_PROCID", 0);
  r.world_size = get_int(env, "SLURM_NTASKS", get_int(env, "SLURM_NPROCS", 1));
  r.local_rank = get_int(env, "SLURM_LOCALID", 0);
  if (const std::string* per = find(env, "SLURM_NTASKS_PER_NODE")) {
    r.local_world_size = parse_int("SLURM_NTASKS_PER_NODE", *per);
  } else if (const std::string* tasks = find(env, "SLURM_STEP_TASKS_PER_NODE") ? find(env, "SLURM_STEP_TASKS_PER_NODE")
                                                                                : find(env, "SLURM_TASKS_PER_NODE")) {
    r.local_world_size = slurm_tasks_on_node(*tasks, get_int(env, "SLURM_NODEID", 0));
  } else {
    r.local_world_size = r.world_size;
  }
  if (const std::string* addr = find(env, "MASTER_ADDR")) {
    r.master_addr = *addr;
  } else if (const std::string* nodes = find(env, "SLURM_STEP_NODELIST") ? find(env, "SLURM_STEP_NODELIST")
                                                                          : find(env, "SLURM_JOB_NODELIST")) {
    r.master_addr = slurm_first_host(*nodes);
  } else {
    r.master_addr = get_str(env, "SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1");
  }
  // One port per job so two jobs sharing a node do not collide on 29500.
  const int job = get_int(env, "SLURM_JOB_ID", 0);
  r.master_port = get_int(env, "MASTER_PORT", kDefaultMasterPort + job % 10000);
  validate(r, "SLURM_PROCID", "SLURM_NTASKS");
  return r;
}

// mpirun without MASTER_ADDR: one node is 127.0.0.1; across nodes the master is the host mpirun runs on
// (its first address in OMPI_MCA_orte_hnp_uri), which holds rank 0 when mpirun is started on the first
// host of --host/--hostfile. Rank 0 checks that: its local daemon is mpirun itself only on that host.
std::string openmpi_master(const EnvMap& env, const RankInfo& r) {
  if (const std::string* addr = find(env, "MASTER_ADDR")) return *addr;
  if (r.local_world_size == r.world_size) return "127.0.0.1";
  const std::string* hnp = find(env, "OMPI_MCA_orte_hnp_uri");
  XTRAIN_USAGE_CHECK(hnp, "mpirun over several nodes without OMPI_MCA_orte_hnp_uri (Open MPI 5?): set MASTER_ADDR "
                     "(e.g. mpirun -x MASTER_ADDR=<first host>)");
  const std::string* local = find(env, "OMPI_MCA_orte_local_daemon_uri");
  XTRAIN_USAGE_CHECK(r.rank != 0 || (local && *local == *hnp),
                     "mpirun over several nodes: rank 0 does not run on the host where mpirun runs, so MASTER_ADDR "
                     "has no default; start mpirun on the first host of --host/--hostfile or pass "
                     "-x MASTER_ADDR=<rank 0's host>");
  return openmpi_hnp_address(*hnp);
}

RankInfo from_openmpi(const EnvMap& env) {
  RankInfo r;
  r.source = "openmpi";
  r.rank = get_int(env, "OMPI_COMM_WORLD_RANK", 0);
  r.world_size = get_int(env, "OMPI_COMM_WORLD_SIZE", 1);
  r.local_rank = get_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
  r.local_world_size = get_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", r.world_size);
  r.master_addr = openmpi_master(env, r);
  // One port per mpirun (its job family, the upper 16 bits of the job id), as for Slurm jobs.
  const std::string* job = find(env, "OMPI_MCA_ess_base_jobid");
  const long family = job ? (std::strtol(job->c_str(), nullptr, 10) >> 16) : 0;
  r.master_port = get_int(env, "MASTER_PORT", kDefaultMasterPort + static_cast<int>(family % 10000));
  validate(r, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  return r;
}

}  // namespace

std::string RankInfo::describe() const {
  return c10::str("rank ", rank, " of ", world_size, " (local ", local_rank, " of ", local_world_size, ") from ",
                  source, world_size > 1 ? c10::str(", master ", master_addr, ":", master_port) : std::string());
}

RankInfo rank_info_from_env(const EnvMap& env) {
  if (find(env, "RANK") && find(env, "WORLD_SIZE")) return from_torchrun(env);
  if (find(env, "SLURM_PROCID") && (find(env, "SLURM_NTASKS") || find(env, "SLURM_NPROCS"))) return from_slurm(env);
  if (find(env, "OMPI_COMM_WORLD_RANK")) return from_openmpi(env);
  return RankInfo{};
}

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

RankInfo rank_info_from_env() { return rank_info_from_env(current_environment()); }

std::optional<int> local_world_size_to_export(const EnvMap& env) {
  if (find(env, "LOCAL_WORLD_SIZE") || find(env, "RANK")) return std::nullopt;
  try {
    const RankInfo info = rank_info_from_env(env);
    if (info.source == "slurm" || info.source == "openmpi") return info.local_world_size;
  } catch (const UsageError&) {
    // Reported with the variable's name when the run reads its rank.
  }
  return std::nullopt;
}

int slurm_tasks_on_node(const std::string& tasks_per_node, int node_index) {
  // Comma-separated "count" or "count(xrepeat)" items.
  int node = 0;
  size_t pos = 0;
  while (pos < tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', pos);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(pos, end - pos);
    const auto paren = item.find("(x");
    const int count = parse_int("SLURM_TASKS_PER_NODE", item.substr(0, paren));
    int repeat = 1;
    if (paren != std::string::npos) {
      XTRAIN_USAGE_CHECK(item.back() == ')', "SLURM_TASKS_PER_NODE: bad item '", item, "' in '", tasks_per_node, "'");
      repeat = parse_int("SLURM_TASKS_PER_NODE", item.substr(paren + 2, item.size() - paren - 3));
    }
    if (node_index < node + repeat) return count;
    node += repeat;
    pos = end + 1;
  }
  XTRAIN_USAGE_ERROR("SLURM_TASKS_PER_NODE '", tasks_per_node, "' lists ", node, " nodes; SLURM_NODEID is ",
                     node_index);
}

std::string openmpi_hnp_address(const std::string& uri) {
  // "<jobid>.<vpid>;tcp://<addr>[,<addr>...]:<port>[;tcp6://...]"
  const auto tcp = uri.find("tcp://");
  XTRAIN_USAGE_CHECK(tcp != std::string::npos, "OMPI_MCA_orte_hnp_uri '", uri,
                     "' names no tcp:// address; set MASTER_ADDR (mpirun -x MASTER_ADDR=<first host>)");
  const std::string rest = uri.substr(tcp + 6);
  const auto stop = rest.find_first_of(",:;");
  XTRAIN_USAGE_CHECK(stop != 0 && stop != std::string::npos, "OMPI_MCA_orte_hnp_uri '", uri,
                     "': cannot read mpirun's address; set MASTER_ADDR");
  return rest.substr(0, stop);
}

std::string slurm_first_host(const std::string& nodelist) {
  const auto comma = nodelist.find(',');
  const auto bracket = nodelist.find('[');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
    return nodelist.substr(0, comma);
  }
  // prefix[first-range,...]suffix: the first number of the first range, zero padding kept.
  const auto close = nodelist.find(']', bracket);
  XTRAIN_USAGE_CHECK(close != std::string::npos, "SLURM_JOB_NODELIST: unbalanced '[' in '", nodelist, "'");
  const std::string inside = nodelist.substr(bracket + 1, close - bracket - 1);
  const auto stop = inside.find_first_of(",-");
  std::string suffix = nodelist.substr(close + 1);
  suffix = suffix.substr(0, suffix.find(','));
  return nodelist.substr(0, bracket) + inside.substr(0, stop) + suffix;
}

}  // namespace xtrain::comm
