// Sequence-length curriculum: DeepSpeed's legacy CurriculumScheduler (curriculum_type "seqlen";
// deepspeed/runtime/data_pipeline/curriculum_scheduler.py) — the difficulty is a pure function of
// the global step (fixed_linear, fixed_root, fixed_discrete), frozen once it reaches
// max_difficulty — and the truncation of a text batch to that many positions, as Megatron-DeepSpeed
// models do with tokens[:, :curriculum_seqlen]. The "custom" schedule (a Python callback) is not
// offered.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "xtrain/data/batch.h"
#include "xtrain/data/options.h"

namespace xtrain::data {

class CurriculumScheduler {
 public:
  // Validates the options (UsageError naming the curriculum_learning.* key). Logs DeepSpeed's
  // warning when difficulty_step is not a multiple of 8.
  explicit CurriculumScheduler(const CurriculumOptions& options);

  // The pacing function at global step s (DeepSpeed's get_difficulty). fixed_root with degree k
  // (fixed_linear: k = 1), T = total_curriculum_step, q = difficulty_step:
  //   v = floor((s/T)^(1/k) · (max − min) + min); v −= v mod q; v = max(v, ⌈min/q⌉·q); v = min(v, max)
  // fixed_discrete: difficulty[i] for the first i with s ≤ max_step[i], else difficulty.back().
  int64_t difficulty_at(int64_t global_step) const;

  // DeepSpeed's update_difficulty: the engine calls it before every training forward with
  // global_steps + 1 (the optimizer step being computed, 1-based), so every micro-batch of one step
  // gets the same length. Once the current difficulty is >= max_difficulty it no longer changes.
  // Starts at min_difficulty. Returns the current difficulty.
  int64_t update(int64_t global_step);
  int64_t current() const { return current_; }
  // For resume: the value current() had when the checkpoint was written.
  void set_current(int64_t difficulty) { current_ = difficulty; }

  const CurriculumOptions& options() const { return options_; }

 private:
  int64_t root_difficulty(int64_t global_step, double root_degree) const;

  CurriculumOptions options_;
  int64_t current_;
};

// The first min(T, seqlen) positions of a [B, T] text batch (input and target), contiguous.
// UsageError for a batch that is not [B, T] (image batches have no sequence length) or seqlen < 1.
Batch truncate_to_seqlen(const Batch& batch, int64_t seqlen);

}  // namespace xtrain::data
