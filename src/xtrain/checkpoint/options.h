// DeepSpeed's `checkpoint` section (§a.13) and xtrain's checkpoint keys (`xtrain.checkpoint`).
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::checkpoint {

struct CheckpointOptions {
  std::string tag_validation = "Warn";
  bool load_universal = false;
  bool use_node_local_storage = false;
  template <class V>
  void visit(V& v) {
    v.choice("tag_validation", tag_validation, {"Ignore", "Warn", "Fail", "ignore", "warn", "fail"}, "check that every rank saves the same tag");
    v("load_universal", load_universal, "accepted: xtrain checkpoints are always reshardable");
    v("use_node_local_storage", use_node_local_storage, "local rank 0 of each node writes");
    v.nested("parallel_write", [&](auto& s) { s("pipeline_stage", pipeline_stage_parallel_write, "accepted for compatibility"); });
  }
  bool pipeline_stage_parallel_write = false;
};

}  // namespace xtrain::checkpoint
