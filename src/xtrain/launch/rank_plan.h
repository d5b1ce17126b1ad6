// Which ranks this launcher starts and the environment each one gets: torchrun's variables
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GROUP_RANK) plus the
// thread policy (the node's cores divided among its local ranks: OMP_NUM_THREADS, XTRAIN_THREADS,
// unless the user set them). Ranks are numbered host by host, slot by slot (DeepSpeed's order).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "xtrain/launch/hostfile.h"

namespace xtrain::launch {

struct RankSlot {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  int local_world_size = 1;
  std::string host;  // "" = this machine
};

struct RankPlan {
  std::vector<RankSlot> ranks;  // the ranks this launcher starts
  int world_size = 1;
  int nnodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// One launcher per node: this node's nproc ranks of nnodes × nproc.
RankPlan plan_node(int nproc_per_node, int nnodes, int node_rank, const std::string& master_addr, int master_port);
// A hostfile: every rank of every selected host (remote ones started over ssh). The master is the
// first host unless given; a local first host with remote others needs an explicit address.
RankPlan plan_hosts(const std::vector<NodeSlots>& nodes, const std::string& master_addr, int master_port);

int threads_per_rank(int cores, int local_world_size);

using Env = std::map<std::string, std::string>;
// The variables to set for one rank. `inherited` is the launcher's environment (for the
// user-set thread variables that win); `cores` this node's core count.
Env rank_environment(const RankSlot& slot, const RankPlan& plan, int cores, const Env& inherited);

}  // namespace xtrain::launch
