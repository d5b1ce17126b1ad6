// Checkpoints written with checkpoint.use_node_local_storage on several nodes: each node's folder
// holds its ranks' part of a tag, and its manifest's `extra` says which ("node_local": node, nodes,
// ranks; node 0's also "ranks_by_node"). gather_node_parts copies the parts of one tag, given every
// node's folder, into one complete checkpoint that consolidate, fingerprint, eval and resume read as
// any other (DeepSpeed leaves the gathering to the user; xtrain checks that no node is missing).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/checkpoint/store.h"

namespace xtrain::checkpoint {

struct NodePartInfo {
  int node = 0;
  int nodes = 1;
  std::vector<int64_t> ranks;
};

// The node-local record of a checkpoint, or nullopt for a checkpoint that is whole by itself.
std::optional<NodePartInfo> node_part_info(const CheckpointReader& reader);

// Every node's part of one tag (each node once, all the same tag; UsageError naming what is
// missing) into out_root/<tag> with `latest`; returns that folder.
std::string gather_node_parts(const std::vector<CheckpointReader>& parts, const std::string& out_root);

// Node 0's manifest `extra` for the gathered whole: "node_local" becomes "gathered_from_nodes".
std::string gathered_extra(const std::string& node0_extra);

// (root, tag) of a tag folder, a checkpoints root (tag "": its latest), or a run directory.
std::pair<std::string, std::string> resolve_path(std::string path);

// fingerprint() over several nodes' folders of one checkpoint (gathered into a temporary folder).
std::string fingerprint_nodes(const std::vector<std::string>& paths);

}  // namespace xtrain::checkpoint
