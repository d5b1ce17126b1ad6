// checkpoint.use_node_local_storage on several nodes (DeepSpeed's key; no shared file system): each
// node keeps its ranks' parts under its own --output, local rank 0 of each node commits its node's
// part there (every other node first, node 0 last: node 0's `latest` is the run's), and node 0's
// manifest records which node holds which ranks. A resume takes node 0's latest tag, checks that
// every node has its part (a missing one is an error naming the node and its path), and sends each
// node's files to every node once, into <output>/checkpoints/.gathered/<tag> (a complete checkpoint,
// so ZeRO reshards on load as from a shared folder), which it deletes once loaded. Used by
// `xtrain train` (run_checkpoint.cpp) and by the Python engine's save/load_checkpoint.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/comm/rank_info.h"
#include "xtrain/config/config.h"

namespace xtrain {

// What the node-local functions need of a run: its config, who this process is, and every rank.
struct NodeLocalRun {
  const config::Config& config;
  const comm::RankInfo& rank;
  comm::Communicator& comm;
  bool lead() const { return rank.rank == 0; }
};

struct NodeMap {
  int node = 0;                             // this rank's node
  std::vector<std::vector<int64_t>> ranks;  // ranks[n]: node n's ranks (blocks from each local rank 0)
};

// True when the key is on and the run spans more than one node.
bool node_local_storage(const NodeLocalRun& s);
// Collective: which node holds which ranks.
NodeMap node_map(const NodeLocalRun& s);
// Collective, after every rank's finish_rank(): the node commits, node 0 last, then prune.
void commit_node_local(const NodeLocalRun& s, checkpoint::CheckpointWriter& writer, const std::string& root);
// Collective, after every rank's finish_rank(): how every save ends. commit_node_local() when
// node_local_storage(), else rank 0 commits for all ranks; then prune to keep_checkpoints.
void commit_checkpoint(const NodeLocalRun& s, checkpoint::CheckpointWriter& writer, const std::string& root);
// Collective: a complete copy of node 0's latest checkpoint on every node; returns its root
// (<root>/.gathered). remove_gathered() deletes it once loaded.
std::string gather_node_local(const NodeLocalRun& s, const std::string& root);
void remove_gathered(const NodeLocalRun& s, const std::string& gathered_root);

}  // namespace xtrain
