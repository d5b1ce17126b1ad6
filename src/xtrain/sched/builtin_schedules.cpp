// The built-in schedules' registry entries: DeepSpeed's five (deepspeed_schedules.h) and xtrain's
// Adaptive (adaptive.h), each with the checks its formulas need (UsageError naming the key).
#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/sched/adaptive.h"
#include "xtrain/sched/deepspeed_schedules.h"
#include "xtrain/sched/registry.h"

namespace xtrain::sched {
namespace {

void check_warmup_type(const std::string& type) {
  XTRAIN_USAGE_CHECK(type == "log" || type == "linear", "sched: warmup_type must be \"log\" or \"linear\", got \"",
                     type, "\" (scheduler.params.warmup_type)");
}

void check_one_cycle(const OneCycleParams& p) {
  XTRAIN_USAGE_CHECK(p.cycle_min_lr >= 0 && p.cycle_max_lr >= 0,
                     "sched: OneCycle needs cycle_min_lr and cycle_max_lr >= 0, got ", p.cycle_min_lr, " and ",
                     p.cycle_max_lr, " (scheduler.params.cycle_min_lr, cycle_max_lr)");
  XTRAIN_USAGE_CHECK(p.cycle_first_step_size > 0, "sched: cycle_first_step_size must be > 0, got ",
                     p.cycle_first_step_size, " (scheduler.params.cycle_first_step_size)");
  XTRAIN_USAGE_CHECK(p.cycle_second_step_size == -1 || p.cycle_second_step_size > 0,
                     "sched: cycle_second_step_size must be > 0 (or -1: the first), got ", p.cycle_second_step_size,
                     " (scheduler.params.cycle_second_step_size)");
  XTRAIN_USAGE_CHECK(p.decay_step_size >= 0, "sched: decay_step_size must be >= 0, got ", p.decay_step_size,
                     " (scheduler.params.decay_step_size)");
}

void check_adaptive(const AdaptiveParams& p, double peak) {
  XTRAIN_USAGE_CHECK(peak > 0, "sched: Adaptive needs a peak lr > 0, got ", peak, " (scheduler.params.lr)");
  XTRAIN_USAGE_CHECK(p.warmup_num_steps >= 0, "sched: warmup_num_steps must be >= 0, got ", p.warmup_num_steps,
                     " (scheduler.params.warmup_num_steps)");
  XTRAIN_USAGE_CHECK(p.smoothing >= 0 && p.smoothing < 1, "sched: smoothing must be in [0, 1), got ", p.smoothing,
                     " (scheduler.params.smoothing)");
  XTRAIN_USAGE_CHECK(p.patience >= 1, "sched: patience must be >= 1, got ", p.patience, " (scheduler.params.patience)");
  XTRAIN_USAGE_CHECK(p.patience_growth >= 1, "sched: patience_growth must be >= 1, got ", p.patience_growth,
                     " (scheduler.params.patience_growth)");
  XTRAIN_USAGE_CHECK(p.factor > 0 && p.factor < 1, "sched: factor must be in (0, 1), got ", p.factor,
                     " (scheduler.params.factor)");
  XTRAIN_USAGE_CHECK(p.threshold >= 0, "sched: threshold must be >= 0, got ", p.threshold,
                     " (scheduler.params.threshold)");
  XTRAIN_USAGE_CHECK(p.cooldown >= 0, "sched: cooldown must be >= 0, got ", p.cooldown, " (scheduler.params.cooldown)");
  XTRAIN_USAGE_CHECK(p.min_lr >= 0, "sched: min_lr must be >= 0, got ", p.min_lr, " (scheduler.params.min_lr)");
}

std::unique_ptr<Schedule> make_warmup(const SchedulerOptions& o, bool decay) {
  check_warmup_type(o.warmup.warmup_type);
  XTRAIN_USAGE_CHECK(!decay || o.warmup.total_num_steps > 0, "sched: WarmupDecayLR needs total_num_steps > 0, got ",
                     o.warmup.total_num_steps, " (scheduler.params.total_num_steps)");
  return std::make_unique<WarmupSchedule>(o.warmup, decay);
}

std::unique_ptr<Schedule> make_cosine(const SchedulerOptions& o, double base_lr) {
  const auto& c = o.cosine;
  check_warmup_type(c.warmup_type);
  XTRAIN_USAGE_CHECK(c.total_num_steps > 0 && c.total_num_steps != std::max<int64_t>(2, c.warmup_num_steps),
                     "sched: WarmupCosineLR needs total_num_steps > 0 and != max(2, warmup_num_steps), got ",
                     c.total_num_steps, " (scheduler.params.total_num_steps)");
  return std::make_unique<WarmupCosineSchedule>(c, base_lr);
}

std::unique_ptr<Schedule> make_range_test(const SchedulerOptions& o) {
  XTRAIN_USAGE_CHECK(o.range_test.lr_range_test_step_size > 0, "sched: lr_range_test_step_size must be > 0, got ",
                     o.range_test.lr_range_test_step_size, " (scheduler.params.lr_range_test_step_size)");
  return std::make_unique<LRRangeTestSchedule>(o.range_test);
}

std::unique_ptr<Schedule> make_adaptive(const SchedulerOptions& o, double base_lr) {
  const double peak = o.adaptive.lr < 0 ? base_lr : o.adaptive.lr;
  check_adaptive(o.adaptive, peak);
  return std::make_unique<AdaptiveSchedule>(o.adaptive, peak);
}

}  // namespace

std::vector<ScheduleEntry> builtin_schedules() {
  return {
      {"WarmupLR", "warm-up, then constant", [](const SchedulerOptions& o, double) { return make_warmup(o, false); }},
      {"WarmupDecayLR", "warm-up, then linear decay to 0",
       [](const SchedulerOptions& o, double) { return make_warmup(o, true); }},
      {"WarmupCosineLR", "warm-up, then cosine decay", make_cosine},
      {"OneCycle", "one lr and momentum cycle, then decay",
       [](const SchedulerOptions& o, double) -> std::unique_ptr<Schedule> {
         check_one_cycle(o.one_cycle);
         return std::make_unique<OneCycleSchedule>(o.one_cycle);
       }},
      {"LRRangeTest", "the LR range test", [](const SchedulerOptions& o, double) { return make_range_test(o); }},
      {"Adaptive", "cuts the lr when the smoothed loss plateaus", make_adaptive},
  };
}

}  // namespace xtrain::sched
