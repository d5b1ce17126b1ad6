// Rank numbering and per-rank environment; see rank_plan.h.
#include "xtrain/launch/rank_plan.h"

#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/launch/remote.h"

namespace xtrain::launch {

RankPlan plan_node(int nproc_per_node, int nnodes, int node_rank, const std::string& master_addr, int master_port) {
  XTRAIN_USAGE_CHECK(nproc_per_node >= 1, "launch: --nproc-per-node must be >= 1, got ", nproc_per_node);
  XTRAIN_USAGE_CHECK(nnodes >= 1, "launch: --nnodes must be >= 1, got ", nnodes);
  XTRAIN_USAGE_CHECK(node_rank >= 0 && node_rank < nnodes, "launch: --node-rank ", node_rank,
                     " must be in [0, --nnodes=", nnodes, ")");
  XTRAIN_USAGE_CHECK(master_port > 0 && master_port < 65536, "launch: --master-port must be in 1..65535, got ",
                     master_port);
  RankPlan p;
  p.world_size = nproc_per_node * nnodes;
  p.nnodes = nnodes;
  p.master_addr = master_addr;
  p.master_port = master_port;
  for (int l = 0; l < nproc_per_node; ++l) p.ranks.push_back({node_rank * nproc_per_node + l, l, node_rank, nproc_per_node, ""});
  return p;
}

RankPlan plan_hosts(const std::vector<NodeSlots>& nodes, const std::string& master_addr, int master_port) {
  XTRAIN_USAGE_CHECK(!nodes.empty(), "launch: no hosts to run on");
  RankPlan p;
  p.nnodes = static_cast<int>(nodes.size());
  p.master_port = master_port;
  const bool all_local = std::all_of(nodes.begin(), nodes.end(), [](const NodeSlots& n) { return is_local_host(n.host); });
  if (!master_addr.empty()) {
    p.master_addr = master_addr;
  } else {
    XTRAIN_USAGE_CHECK(all_local || !is_local_host(nodes.front().host), "launch: the first host '",
                       nodes.front().host, "' is this machine but other hosts are remote: give --master-addr",
                       " (an address of this machine the other hosts can reach)");
    p.master_addr = all_local ? "127.0.0.1" : nodes.front().host;
  }
  int rank = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int local_world = static_cast<int>(nodes[n].slots.size());
    const std::string host = is_local_host(nodes[n].host) ? "" : nodes[n].host;
    for (int l = 0; l < local_world; ++l) p.ranks.push_back({rank++, l, static_cast<int>(n), local_world, host});
  }
  p.world_size = rank;
  return p;
}

int threads_per_rank(int cores, int local_world_size) {
  return std::max(1, cores / std::max(1, local_world_size));
}

Env rank_environment(const RankSlot& slot, const RankPlan& plan, int cores, const Env& inherited) {
  Env env{{"RANK", std::to_string(slot.rank)},
          {"LOCAL_RANK", std::to_string(slot.local_rank)},
          {"WORLD_SIZE", std::to_string(plan.world_size)},
          {"LOCAL_WORLD_SIZE", std::to_string(slot.local_world_size)},
          {"GROUP_RANK", std::to_string(slot.node_rank)},
          {"MASTER_ADDR", plan.master_addr},
          {"MASTER_PORT", std::to_string(plan.master_port)}};
  const std::string threads = std::to_string(threads_per_rank(cores, slot.local_world_size));
  for (const char* var : {"OMP_NUM_THREADS", "XTRAIN_THREADS"}) {
    auto it = inherited.find(var);
    env[var] = it != inherited.end() && !it->second.empty() ? it->second : threads;
  }
  return env;
}

}  // namespace xtrain::launch
