// The tiny-settings switch (see smoke.h).
#include "xtrain/run/smoke.h"

#include <algorithm>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/models/registry.h"

namespace xtrain::smoke {

namespace {

constexpr int64_t kSteps = 2;
constexpr int64_t kSweepSteps = 10;
constexpr int64_t kSeqLen = 64;
constexpr int64_t kHeadSize = 16;

bool user_sets(const std::vector<std::string>& user, const std::string& key) {
  return std::any_of(user.begin(), user.end(), [&](const std::string& o) { return o.rfind(key + "=", 0) == 0; });
}

std::string set(const std::string& key, int64_t value) { return key + "=" + std::to_string(value); }

}  // namespace

bool enabled() {
  const std::string v = env::get_or("XTRAIN_SMOKE", "");
  if (v.empty() || v == "0" || v == "false" || v == "off") return false;
  XTRAIN_USAGE_CHECK(v == "1" || v == "true" || v == "on", "XTRAIN_SMOKE must be 1 (tiny settings) or 0, got '", v,
                     "'");
  return true;
}

int64_t cap(int64_t value, int64_t tiny) {
  if (!enabled()) return value;
  return value <= 0 ? tiny : std::min(value, tiny);
}

std::vector<std::string> train_overrides(const config::Config& loaded, const std::vector<std::string>& user,
                                         bool resumed, bool lr_sweep) {
  if (resumed) return {set("xtrain.steps", loaded.trainer.steps + kSteps)};
  std::vector<std::string> out = {
      set("xtrain.steps", lr_sweep ? kSweepSteps : kSteps),
      set("xtrain.eval_interval", 0),
      set("xtrain.eval_batches", 1),
      set("xtrain.save_interval", 0),
      set("xtrain.generate.tokens", 16),
      set("steps_per_print", 1),
      // The accumulation count stays (a pipeline needs its micro-batches); the global batch follows.
      set("train_micro_batch_size_per_gpu", 2),
      "train_batch_size=auto",
      set("gradient_accumulation_steps", loaded.engine.gradient_accumulation_steps.value_or(1)),
  };
  // The model's own tiny shape, when its entry gives one (models/registry.h: ModelEntry::tiny).
  const auto& entry = models::find_model(loaded.model.type);
  if (!entry.tiny) return out;
  models::TinyLimits limits;
  limits.tp = std::max<int64_t>(1, loaded.tensor_parallel.size);
  limits.stages = std::max<int64_t>(1, loaded.pipeline.stages);
  limits.seq_len = kSeqLen;
  limits.head_size = kHeadSize;
  for (const auto& [key, value] : entry.tiny(loaded.model, limits)) {
    // A seq-len curriculum is laid out for the configured context: keep it; so does the user's.
    if (key == "seq_len" && (user_sets(user, "xtrain.model.seq_len") || loaded.curriculum_learning.enabled)) continue;
    out.push_back(set("xtrain.model." + key, value));
  }
  return out;
}

}  // namespace xtrain::smoke
