// CurriculumScheduler: DeepSpeed's formulas in double precision (Python floats are IEEE doubles and
// its ** on floats is C's pow), integer steps as Python's floor/mod on non-negative values. The
// lower clamp to the first multiple of difficulty_step at or above min_difficulty is current
// upstream DeepSpeed's (older versions could return 0 when min_difficulty < difficulty_step).
#include "xtrain/data/curriculum.h"

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"

namespace xtrain::data {

namespace {

void check_options(const CurriculumOptions& o) {
  XTRAIN_USAGE_CHECK(o.curriculum_type == "seqlen", "data: curriculum_learning.curriculum_type must be \"seqlen\", got \"",
                     o.curriculum_type, "\"");
  XTRAIN_USAGE_CHECK(o.min_difficulty >= 1, "data: curriculum_learning.min_difficulty must be >= 1, got ",
                     o.min_difficulty);
  XTRAIN_USAGE_CHECK(o.max_difficulty >= o.min_difficulty, "data: curriculum_learning.max_difficulty (",
                     o.max_difficulty, ") must be >= min_difficulty (", o.min_difficulty, ")");
  if (o.schedule_type == "fixed_discrete") {
    XTRAIN_USAGE_CHECK(!o.difficulty.empty() && !o.max_step.empty(),
                       "data: curriculum_learning.schedule_config.difficulty and .max_step must be non-empty for "
                       "fixed_discrete, got ", o.difficulty.size(), " and ", o.max_step.size(), " entries");
    XTRAIN_USAGE_CHECK(o.difficulty.size() == o.max_step.size() + 1,
                       "data: curriculum_learning.schedule_config.difficulty must have one entry more than max_step "
                       "(the last difficulty holds after the last max_step), got ", o.difficulty.size(), " and ",
                       o.max_step.size());
    for (int64_t d : o.difficulty) {
      XTRAIN_USAGE_CHECK(d >= 1, "data: curriculum_learning.schedule_config.difficulty entries must be >= 1, got ", d);
    }
    return;
  }
  XTRAIN_USAGE_CHECK(o.schedule_type == "fixed_linear" || o.schedule_type == "fixed_root",
                     "data: curriculum_learning.schedule_type must be fixed_linear, fixed_root or fixed_discrete, got \"",
                     o.schedule_type, "\"");
  XTRAIN_USAGE_CHECK(o.total_curriculum_step > 0,
                     "data: curriculum_learning.schedule_config.total_curriculum_step must be > 0, got ",
                     o.total_curriculum_step);
  XTRAIN_USAGE_CHECK(o.difficulty_step > 0, "data: curriculum_learning.schedule_config.difficulty_step must be > 0, got ",
                     o.difficulty_step);
  if (o.schedule_type == "fixed_root") {
    XTRAIN_USAGE_CHECK(o.root_degree >= 1, "data: curriculum_learning.schedule_config.root_degree must be >= 1, got ",
                       o.root_degree);
  }
  if (o.difficulty_step % 8 != 0) {
    log::warn("data: curriculum_learning.schedule_config.difficulty_step=", o.difficulty_step,
              " is not a multiple of 8; sequence lengths that are multiples of 8 (fp16) or 16 (int8) use the "
              "tensor cores");
  }
}

int64_t floor_mod(int64_t a, int64_t q) {  // Python's a % q for q > 0
  const int64_t r = a % q;
  return r < 0 ? r + q : r;
}

}  // namespace

CurriculumScheduler::CurriculumScheduler(const CurriculumOptions& options)
    : options_(options), current_(options.min_difficulty) {
  check_options(options_);
}

int64_t CurriculumScheduler::root_difficulty(int64_t global_step, double root_degree) const {
  const auto& o = options_;
  const double progress =
      std::pow(static_cast<double>(global_step) / static_cast<double>(o.total_curriculum_step), 1.0 / root_degree);
  int64_t v = static_cast<int64_t>(std::floor(progress * static_cast<double>(o.max_difficulty - o.min_difficulty) +
                                              static_cast<double>(o.min_difficulty)));
  const int64_t q = o.difficulty_step;
  v -= floor_mod(v, q);
  const int64_t first = (o.min_difficulty + q - 1) / q * q;  // ⌈min/q⌉·q
  v = std::max(v, first);
  return std::min(v, o.max_difficulty);
}

int64_t CurriculumScheduler::difficulty_at(int64_t global_step) const {
  const auto& o = options_;
  if (o.schedule_type == "fixed_discrete") {
    if (global_step > o.max_step.back()) return o.difficulty.back();
    for (size_t i = 0; i < o.max_step.size(); ++i) {
      if (global_step <= o.max_step[i]) return o.difficulty[i];
    }
    TORCH_INTERNAL_ASSERT(false, "curriculum: step ", global_step, " matched no max_step");
  }
  return root_difficulty(global_step, o.schedule_type == "fixed_root" ? static_cast<double>(o.root_degree) : 1.0);
}

int64_t CurriculumScheduler::update(int64_t global_step) {
  if (current_ < options_.max_difficulty) current_ = difficulty_at(global_step);
  return current_;
}

Batch truncate_to_seqlen(const Batch& batch, int64_t seqlen) {
  XTRAIN_USAGE_CHECK(seqlen >= 1, "data: curriculum sequence length must be >= 1, got ", seqlen);
  XTRAIN_USAGE_CHECK(batch.input.defined() && batch.input.dim() == 2,
                     "data: the seqlen curriculum needs [B, T] text batches, got input ",
                     batch.input.defined() ? batch.input.sizes() : at::IntArrayRef{});
  const int64_t T = batch.input.size(1);
  if (seqlen >= T) return batch;
  Batch out;
  out.input = batch.input.narrow(1, 0, seqlen).contiguous();
  if (batch.target.defined()) {
    XTRAIN_USAGE_CHECK(batch.target.dim() == 2 && batch.target.size(1) == T,
                       "data: the seqlen curriculum needs a [B, T] target like the input ", batch.input.sizes(),
                       ", got ", batch.target.sizes());
    out.target = batch.target.narrow(1, 0, seqlen).contiguous();
  }
  return out;
}

}  // namespace xtrain::data
