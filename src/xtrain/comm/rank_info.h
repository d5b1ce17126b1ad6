// Who this process is: rank, world, local rank and the rendezvous address, read from whoever
// started it — torchrun-style variables (our launcher), else Slurm (srun), else Open MPI (mpirun),
// else a single process. A pure function over an environment map so each source is testable.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace xtrain::comm {

using EnvMap = std::map<std::string, std::string>;

constexpr int kDefaultMasterPort = 29500;  // torchrun's

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
  std::string source = "single";  // torchrun | slurm | openmpi | single

  std::string describe() const;  // "rank 1 of 4 (local 1 of 2) from torchrun, master 10.0.0.1:29500"
};

// torchrun (RANK and WORLD_SIZE set) > Slurm (SLURM_PROCID) > Open MPI (OMPI_COMM_WORLD_RANK) >
// single. UsageError naming the variable when one is malformed or inconsistent.
RankInfo rank_info_from_env(const EnvMap& env);
RankInfo rank_info_from_env();  // this process's environment
EnvMap current_environment();

// srun and mpirun name the node's rank count in their own variables, but the thread policy, the memory
// pool and the NVMe budget read torchrun's LOCAL_WORLD_SIZE. The value to export when it is missing and
// Slurm or Open MPI started this process (16 ranks on a 64-core node then take 4 threads each, not 64);
// nothing when it is set, when no such launcher started us, or when its variables are malformed (the
// run's rank_info_from_env names them).
std::optional<int> local_world_size_to_export(const EnvMap& env);

// Open MPI 4's OMPI_MCA_orte_hnp_uri "123.0;tcp://10.0.0.1,10.1.0.1:4567" -> "10.0.0.1" (mpirun's host).
std::string openmpi_hnp_address(const std::string& uri);

// Slurm's compressed lists, exposed for tests.
// SLURM_TASKS_PER_NODE "2(x3),1" -> tasks on node `node_index` (2 for nodes 0-2, 1 for node 3).
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_index);
// SLURM_JOB_NODELIST "gpu-[003-010,012],cpu1" -> "gpu-003" (the first host; rank 0 runs there).
std::string slurm_first_host(const std::string& nodelist);

}  // namespace xtrain::comm
