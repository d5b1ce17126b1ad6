// DeepSpeed's `checkpoint` section (§a.13) and xtrain's checkpoint keys (`xtrain.checkpoint`).
// tag_validation is matched in any case, as DeepSpeed upper-cases it before checking.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include "xtrain/base/error.h"

namespace xtrain::checkpoint {

// "Ignore" | "Warn" | "Fail" for any spelling of those words; UsageError naming the key otherwise.
inline std::string tag_validation_mode(const std::string& value) {
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "ignore") return "Ignore";
  if (lower == "warn") return "Warn";
  if (lower == "fail") return "Fail";
  XTRAIN_USAGE_ERROR("config: checkpoint.tag_validation must be Ignore, Warn or Fail (any case), got \"", value, "\"");
}

struct CheckpointOptions {
  std::string tag_validation = "Warn";  // normalised by tag_validation_mode
  bool load_universal = false;
  bool use_node_local_storage = false;
  template <class V>
  void visit(V& v) {
    v("tag_validation", tag_validation, "Ignore | Warn | Fail: at save, every rank's tag is compared; a mismatch warns or fails");
    if (!v.documenting()) tag_validation = tag_validation_mode(tag_validation);
    v("load_universal", load_universal, "accepted: xtrain checkpoints are always reshardable");
    v("use_node_local_storage", use_node_local_storage,
      "no shared file system: each node keeps its ranks' parts under its own --output, its local rank 0 "
      "commits them; a resume gathers every node's part");
    v.nested("parallel_write", [&](auto& s) { s("pipeline_stage", pipeline_stage_parallel_write, "accepted for compatibility"); });
  }
  bool pipeline_stage_parallel_write = false;
};

}  // namespace xtrain::checkpoint
