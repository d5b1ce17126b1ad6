// `scheduler: {type, params}` — DeepSpeed's five schedules with their defaults
// (reference/deepspeed.md §a.3), plus xtrain's "Adaptive" plateau schedule.
#pragma once
#include <any>
#include <cstdint>
#include <string>

namespace xtrain::sched {

struct WarmupParams {  // WarmupLR, and the warm-up part of WarmupDecayLR
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 0.001;
  int64_t warmup_num_steps = 1000;
  std::string warmup_type = "log";
  int64_t total_num_steps = 0;  // WarmupDecayLR only (required there)
  int64_t last_batch_iteration = -1;
  bool with_decay = false;  // set by the reader: WarmupDecayLR has total_num_steps
  template <class V>
  void visit(V& v) {
    v("warmup_min_lr", warmup_min_lr, "lr at the first step");
    v("warmup_max_lr", warmup_max_lr, "lr at the end of warm-up");
    v("warmup_num_steps", warmup_num_steps, "warm-up steps");
    v.choice("warmup_type", warmup_type, {"log", "linear"}, "warm-up curve");
    if (with_decay) v("total_num_steps", total_num_steps, "step at which the lr reaches 0 (required)");
    v("last_batch_iteration", last_batch_iteration, "resume position (-1 = start)");
  }
};

struct WarmupCosineParams {
  int64_t total_num_steps = 0;  // required
  double warmup_min_ratio = 0.0;
  int64_t warmup_num_steps = 1000;
  double cos_min_ratio = 0.0001;
  std::string warmup_type = "log";
  int64_t last_batch_iteration = -1;
  template <class V>
  void visit(V& v) {
    v("total_num_steps", total_num_steps, "total optimizer steps (required)");
    v("warmup_min_ratio", warmup_min_ratio, "lr ratio at the first step");
    v("warmup_num_steps", warmup_num_steps, "warm-up steps");
    v("cos_min_ratio", cos_min_ratio, "lr ratio at total_num_steps");
    v.choice("warmup_type", warmup_type, {"log", "linear"}, "warm-up curve");
    v("last_batch_iteration", last_batch_iteration, "resume position (-1 = start)");
  }
};

struct OneCycleParams {
  double cycle_min_lr = -1;  // required
  double cycle_max_lr = -1;  // required
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  int64_t cycle_second_step_size = -1;  // -1: same as the first
  int64_t cycle_first_stair_count = 0;
  int64_t cycle_second_stair_count = -1;
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
  int64_t last_batch_iteration = -1;
  template <class V>
  void visit(V& v) {
    v("cycle_min_lr", cycle_min_lr, "lr at the start and end of the cycle (required)");
    v("cycle_max_lr", cycle_max_lr, "lr at the peak of the cycle (required)");
    v("decay_lr_rate", decay_lr_rate, "lr decay rate after the cycle");
    v("cycle_first_step_size", cycle_first_step_size, "steps from min to max");
    v("cycle_second_step_size", cycle_second_step_size, "steps from max back to min (-1: first)");
    v("cycle_first_stair_count", cycle_first_stair_count, "accepted, ignored (as DeepSpeed)");
    v("cycle_second_stair_count", cycle_second_stair_count, "accepted, ignored (as DeepSpeed)");
    v("decay_step_size", decay_step_size, "steps per decay interval after the cycle");
    v("cycle_momentum", cycle_momentum, "cycle beta1 inversely to the lr");
    v("cycle_min_mom", cycle_min_mom, "beta1 at the lr peak");
    v("cycle_max_mom", cycle_max_mom, "beta1 at the cycle ends");
    v("decay_mom_rate", decay_mom_rate, "momentum decay rate after the cycle");
    v("last_batch_iteration", last_batch_iteration, "resume position (-1 = start)");
  }
};

struct LRRangeTestParams {
  double lr_range_test_min_lr = 1e-3;
  int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
  int64_t last_batch_iteration = -1;
  template <class V>
  void visit(V& v) {
    v("lr_range_test_min_lr", lr_range_test_min_lr, "starting lr");
    v("lr_range_test_step_size", lr_range_test_step_size, "steps per lr increase interval");
    v("lr_range_test_step_rate", lr_range_test_step_rate, "lr increase per interval");
    v("lr_range_test_staircase", lr_range_test_staircase, "increase in steps instead of continuously");
    v("last_batch_iteration", last_batch_iteration, "resume position (-1 = start)");
  }
};

// xtrain's "Adaptive": warm-up as WarmupLR (linear), then the lr is cut by `factor` when the
// exponentially smoothed loss has not improved by `threshold` (relative) for `patience` steps;
// after each cut the patience grows by `patience_growth`, and `cooldown` steps pass before the
// next decision. Every decision is recorded in the metrics.
struct AdaptiveParams {
  double lr = -1;  // -1: the optimizer's lr
  int64_t warmup_num_steps = 100;
  double smoothing = 0.98;
  int64_t patience = 100;
  double patience_growth = 1.5;
  double factor = 0.5;
  double threshold = 0.01;
  int64_t cooldown = 20;
  double min_lr = 1e-6;
  template <class V>
  void visit(V& v) {
    v("lr", lr, "peak lr (-1: the optimizer's lr)");
    v("warmup_num_steps", warmup_num_steps, "linear warm-up steps");
    v("smoothing", smoothing, "EMA coefficient of the loss");
    v("patience", patience, "steps without improvement before a cut");
    v("patience_growth", patience_growth, "patience multiplier after each cut");
    v("factor", factor, "lr multiplier at a cut");
    v("threshold", threshold, "relative improvement that counts");
    v("cooldown", cooldown, "steps after a cut before the next decision");
    v("min_lr", min_lr, "lr floor");
  }
};

// `type`: "" (none: constant lr), "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle",
// "LRRangeTest", "Adaptive", or one added with sched::register_schedule (sched/registry.h).
struct SchedulerOptions {
  std::string type;
  WarmupParams warmup;  // WarmupLR and WarmupDecayLR
  WarmupCosineParams cosine;
  OneCycleParams one_cycle;
  LRRangeTestParams range_test;
  AdaptiveParams adaptive;
  std::any custom;  // the params of a registered schedule that is not built in (its own struct)
};

}  // namespace xtrain::sched
