// DeepSpeed's schedules (see deepspeed_schedules.h). Each expression keeps DeepSpeed's order of
// operations (e.g. log(t+1) * (1/log(Wn)), not log(t+1)/log(Wn)), so the doubles agree exactly.
#include "xtrain/sched/deepspeed_schedules.h"

#include <algorithm>
#include <cmath>

namespace xtrain::sched {

namespace {

constexpr double kPi = 3.141592653589793;  // math.pi

double position(int64_t last_batch_iteration, int64_t n) { return static_cast<double>(last_batch_iteration + n); }

// The warm-up fraction at position t < Wn.
double warmup_gamma(const std::string& type, double t, double warmup_steps, double inverse_log_warmup) {
  return type == "linear" ? t / warmup_steps : inverse_log_warmup * std::log(t + 1);
}

}  // namespace

WarmupSchedule::WarmupSchedule(const WarmupParams& params, bool with_decay)
    : p_(params),
      with_decay_(with_decay),
      warmup_steps_(static_cast<double>(std::max<int64_t>(2, params.warmup_num_steps))),
      inverse_log_warmup_(1.0 / std::log(warmup_steps_)) {}

double WarmupSchedule::lr_after(int64_t n) const {
  const double t = position(p_.last_batch_iteration, n);
  if (t < 0) return p_.warmup_min_lr;  // written at construction
  double gamma;
  if (t < warmup_steps_) {
    gamma = warmup_gamma(p_.warmup_type, t, warmup_steps_, inverse_log_warmup_);
  } else if (with_decay_) {
    const double total = static_cast<double>(p_.total_num_steps);
    gamma = std::max(0.0, (total - t) / std::max(1.0, total - warmup_steps_));
  } else {
    gamma = 1.0;
  }
  return p_.warmup_min_lr + (p_.warmup_max_lr - p_.warmup_min_lr) * gamma;
}

WarmupCosineSchedule::WarmupCosineSchedule(const WarmupCosineParams& params, double base_lr)
    : p_(params),
      base_lr_(base_lr),
      warmup_steps_(static_cast<double>(std::max<int64_t>(2, params.warmup_num_steps))),
      inverse_log_warmup_(1.0 / std::log(warmup_steps_)) {}

double WarmupCosineSchedule::lr_after(int64_t n) const {
  const double t = position(p_.last_batch_iteration, n);
  if (t < 0) return 0.0;  // DeepSpeed writes 0.0 at construction
  double ratio;
  if (t < warmup_steps_) {
    ratio = warmup_gamma(p_.warmup_type, t, warmup_steps_, inverse_log_warmup_);
    ratio = p_.warmup_min_ratio + ratio * (1.0 - p_.warmup_min_ratio);
  } else {
    const double real_last_step = t - warmup_steps_ + 1;
    const double real_total_steps = static_cast<double>(p_.total_num_steps) - warmup_steps_;
    ratio = (1 + std::cos(kPi * real_last_step / real_total_steps)) / 2;
    ratio = std::max(0.0, p_.cos_min_ratio + (1.0 - p_.cos_min_ratio) * ratio);
  }
  return base_lr_ * ratio;
}

OneCycleSchedule::OneCycleSchedule(const OneCycleParams& params) : p_(params) {
  const double first = static_cast<double>(params.cycle_first_step_size);
  const double second =
      params.cycle_second_step_size < 0 ? first : static_cast<double>(params.cycle_second_step_size);
  total_size_ = first + second;
  step_ratio_ = first / total_size_;
  skip_lr_decay_ = params.decay_step_size == 0 || params.decay_lr_rate == 0;
  skip_mom_decay_ = params.decay_step_size == 0 || params.decay_mom_rate == 0;
}

double OneCycleSchedule::scale_factor(double t) const {
  const double batch_iteration = t + 1;
  const double cycle = std::floor(1 + batch_iteration / total_size_);
  const double x = 1. + batch_iteration / total_size_ - cycle;
  return x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
}

double OneCycleSchedule::lr_after(int64_t n) const {
  const double t = position(p_.last_batch_iteration, n);
  if (t < total_size_) return p_.cycle_min_lr + (p_.cycle_max_lr - p_.cycle_min_lr) * scale_factor(t);
  if (skip_lr_decay_) return p_.cycle_min_lr;
  const double decay_interval = (t - total_size_ + 1) / static_cast<double>(p_.decay_step_size);
  return p_.cycle_min_lr / (1 + p_.decay_lr_rate * decay_interval);
}

std::pair<double, double> OneCycleSchedule::betas_after(int64_t n) const {
  constexpr double kBeta2 = 0.99;  // DeepSpeed overwrites beta2 whenever momentum cycles
  if (!p_.cycle_momentum) return {-1.0, -1.0};
  if (n == 0 && p_.last_batch_iteration == -1) return {p_.cycle_min_mom, kBeta2};  // construction
  const double t = position(p_.last_batch_iteration, n);
  if (t < total_size_) return {p_.cycle_max_mom - (p_.cycle_max_mom - p_.cycle_min_mom) * scale_factor(t), kBeta2};
  if (skip_mom_decay_) return {p_.cycle_max_mom, kBeta2};
  const double decay_interval = (t - total_size_ + 1) / static_cast<double>(p_.decay_step_size);
  return {p_.cycle_max_mom * (1 + p_.decay_mom_rate * decay_interval), kBeta2};
}

LRRangeTestSchedule::LRRangeTestSchedule(const LRRangeTestParams& params) : p_(params) {}

double LRRangeTestSchedule::lr_after(int64_t n) const {
  const double b = position(p_.last_batch_iteration, n) + 1;
  const double step_size = static_cast<double>(p_.lr_range_test_step_size);
  const double interval = p_.lr_range_test_staircase ? std::floor(b / step_size) : b / step_size;
  return p_.lr_range_test_min_lr * (1 + p_.lr_range_test_step_rate * interval);
}

}  // namespace xtrain::sched
