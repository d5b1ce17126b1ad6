// DeepSpeed's five learning-rate schedules (deepspeed/runtime/lr_schedules.py, reference/
// deepspeed.md §a.3) as pure functions of the completed scheduler steps n. DeepSpeed's position is
// t = last_batch_iteration + n (t = n - 1 from a fresh start). The arithmetic mirrors DeepSpeed's
// operation order in double, so values are DeepSpeed's to the last bit, quirks included.
#pragma once
#include <cstdint>
#include <utility>

#include "xtrain/sched/options.h"
#include "xtrain/sched/schedule.h"

namespace xtrain::sched {

// WarmupLR, and WarmupDecayLR when params.with_decay (linear decay to 0 at total_num_steps).
class WarmupSchedule final : public Schedule {
 public:
  WarmupSchedule(const WarmupParams& params, bool with_decay);
  double lr_after(int64_t n) const override;

 private:
  WarmupParams p_;
  bool with_decay_;
  double warmup_steps_;  // max(2, warmup_num_steps)
  double inverse_log_warmup_;
};

// WarmupCosineLR: a ratio of the optimizer's lr; 0.0 at construction; no clamp after total.
class WarmupCosineSchedule final : public Schedule {
 public:
  WarmupCosineSchedule(const WarmupCosineParams& params, double base_lr);
  double lr_after(int64_t n) const override;

 private:
  WarmupCosineParams p_;
  double base_lr_;
  double warmup_steps_;
  double inverse_log_warmup_;
};

// OneCycle: lr up for cycle_first_step_size steps, down for the second, then optional decay;
// beta1 cycles inversely. Quirks kept: beta2 is always 0.99, and construction writes
// (cycle_min_mom, 0.99) although the formula at n = 0 gives cycle_max_mom.
class OneCycleSchedule final : public Schedule {
 public:
  explicit OneCycleSchedule(const OneCycleParams& params);
  double lr_after(int64_t n) const override;
  std::pair<double, double> betas_after(int64_t n) const override;

 private:
  double scale_factor(double t) const;
  OneCycleParams p_;
  double total_size_, step_ratio_;
  bool skip_lr_decay_, skip_mom_decay_;
};

// LRRangeTest: lr = min_lr * (1 + step_rate * k), k = n/step_size (or its floor with staircase).
class LRRangeTestSchedule final : public Schedule {
 public:
  explicit LRRangeTestSchedule(const LRRangeTestParams& params);
  double lr_after(int64_t n) const override;

 private:
  LRRangeTestParams p_;
};

}  // namespace xtrain::sched
