// The tiny-settings switch (see smoke.h).
#include "xtrain/run/smoke.h"

#include <algorithm>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"

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

// The config's heads up to 4 (so the default 4 heads over 3 windows keeps its uneven split), raised
// to cover every multi-scale window and rounded up to a multiple of the tensor-parallel size.
int64_t tiny_heads(const models::ModelOptions& m, int64_t tp) {
  const int64_t windows = m.attention.type == "multiscale" ? static_cast<int64_t>(m.attention.windows.size()) : 0;
  const int64_t heads = std::max({std::min<int64_t>(m.heads, 4), windows, tp, int64_t{1}});
  return (heads + tp - 1) / tp * tp;
}

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
  const auto& m = loaded.model;
  if (m.type == "gpt") {
    const int64_t tp = std::max<int64_t>(1, loaded.tensor_parallel.size);
    const int64_t heads = tiny_heads(m, tp);
    out.push_back(set("xtrain.model.layers", std::max<int64_t>(1, loaded.pipeline.stages)));
    out.push_back(set("xtrain.model.heads", heads));
    out.push_back(set("xtrain.model.d_model", heads * kHeadSize));
    // A seq-len curriculum is laid out for the configured context: keep it.
    if (!user_sets(user, "xtrain.model.seq_len") && !loaded.curriculum_learning.enabled) {
      out.push_back(set("xtrain.model.seq_len", std::min(m.seq_len, kSeqLen)));
    }
  }
  return out;
}

}  // namespace xtrain::smoke
