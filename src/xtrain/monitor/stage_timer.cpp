#include "xtrain/monitor/stage_timer.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "xtrain/base/error.h"

namespace xtrain::monitor {
namespace {

double ms_between(StageTimer::Clock::time_point a, StageTimer::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Nearest-rank percentile of an unsorted copy.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

StageTimer::Scope::Scope(StageTimer* timer, size_t stage) : timer_(timer) {
  if (!timer_) return;
  if (timer_->synchronize_) timer_->synchronize_();
  timer_->open_.push_back({stage, Clock::now(), 0.0});
}

StageTimer::Scope::~Scope() {
  if (timer_) timer_->close_scope();
}

StageTimer::StageTimer(bool enabled, std::function<void()> synchronize)
    : enabled_(enabled), synchronize_(std::move(synchronize)) {}

void StageTimer::begin_step() {
  if (!enabled_) return;
  TORCH_INTERNAL_ASSERT(open_.empty(), "monitor: begin_step inside an open stage scope");
  if (synchronize_) synchronize_();
  in_step_ = true;
  std::fill(current_ms_.begin(), current_ms_.end(), 0.0);
  step_start_ = Clock::now();
}

size_t StageTimer::stage_index(const std::string& name) {
  const auto it = std::find(names_.begin(), names_.end(), name);
  if (it != names_.end()) return static_cast<size_t>(it - names_.begin());
  names_.push_back(name);
  current_ms_.push_back(0.0);
  history_.emplace_back(step_ms_.size(), 0.0);  // earlier steps did not have this stage
  return names_.size() - 1;
}

StageTimer::Scope StageTimer::scope(const std::string& stage) {
  if (!enabled_ || !in_step_) return Scope(nullptr, 0);
  return Scope(this, stage_index(stage));
}

void StageTimer::close_scope() {
  if (synchronize_) synchronize_();
  const Open o = open_.back();
  open_.pop_back();
  const double total = ms_between(o.start, Clock::now());
  current_ms_[o.stage] += total - o.child_ms;
  if (!open_.empty()) open_.back().child_ms += total;
}

std::map<std::string, double> StageTimer::end_step() {
  if (!enabled_ || !in_step_) return {};
  TORCH_INTERNAL_ASSERT(open_.empty(), "monitor: end_step inside an open stage scope");
  if (synchronize_) synchronize_();
  const double step = ms_between(step_start_, Clock::now());
  in_step_ = false;
  std::map<std::string, double> out;
  double inside = 0;
  for (size_t i = 0; i < names_.size(); ++i) {
    out["time/" + names_[i] + "_ms"] = current_ms_[i];
    history_[i].push_back(current_ms_[i]);
    inside += current_ms_[i];
  }
  step_ms_.push_back(step);
  out["time/step_ms"] = step;
  out["time/other_ms"] = std::max(0.0, step - inside);
  return out;
}

std::string StageTimer::summary() const {
  if (step_ms_.empty()) return "";
  const size_t skip = step_ms_.size() > 2 ? 1 : 0;
  auto tail = [skip](const std::vector<double>& v) { return std::vector<double>(v.begin() + skip, v.end()); };
  const std::vector<double> steps = tail(step_ms_);
  const double step_mean = mean(steps);
  std::string out = c10::str("time per step over ", steps.size(), " steps", skip ? " (first step left out)" : "",
                             ", milliseconds:\n");
  char line[160];
  std::snprintf(line, sizeof line, "  %-16s %10s %10s %10s %8s\n", "stage", "mean", "p50", "p90", "share");
  out += line;
  auto row = [&](const std::string& name, const std::vector<double>& v) {
    std::snprintf(line, sizeof line, "  %-16s %10.3f %10.3f %10.3f %7.1f%%\n", name.c_str(), mean(v),
                  percentile(v, 50), percentile(v, 90), step_mean > 0 ? 100.0 * mean(v) / step_mean : 0.0);
    out += line;
  };
  std::vector<double> other = steps;
  for (size_t i = 0; i < names_.size(); ++i) {
    const auto v = tail(history_[i]);
    for (size_t k = 0; k < v.size(); ++k) other[k] -= v[k];
    row(names_[i], v);
  }
  for (double& x : other) x = std::max(0.0, x);
  row("other", other);
  row("step", steps);
  return out;
}

}  // namespace xtrain::monitor
