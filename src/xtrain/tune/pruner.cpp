// The two rules, following Optuna's published semantics: the median compares at exactly the same
// step (no interpolation) and averages the two middle values of an even count; ASHA's cut-off is
// the ⌊n/η⌋-th best value at the rung, and while fewer than η values exist only the best continues.
#include "xtrain/tune/pruner.h"

#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::tune {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::optional<std::string> MedianPruner::check(Trial& trial, const std::vector<Trial>& all) {
  if (trial.intermediate.empty()) return std::nullopt;
  const int64_t step = trial.intermediate.back().first;
  if (step < options_.warmup_steps) return std::nullopt;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [s, v] : trial.intermediate)
    if (s <= step && std::isfinite(v)) best = std::min(best, sign_ * v);
  std::vector<double> others;
  int64_t completed = 0;
  for (const auto& t : all) {
    if (t.id == trial.id || t.state != TrialState::kComplete) continue;
    ++completed;
    std::optional<double> at_step;
    for (const auto& [s, v] : t.intermediate)
      if (s == step && std::isfinite(v)) at_step = sign_ * v;
    if (at_step) others.push_back(*at_step);
  }
  if (completed < options_.startup_trials || others.empty()) return std::nullopt;
  const double m = median(others);
  if (!(best > m)) return std::nullopt;  // a NaN-only trial (best = inf) is stopped
  return c10::str("median rule: best value ", sign_ * best, " by step ", step, " is worse than the median ", sign_ * m,
                  " of ", others.size(), " completed trials at that step");
}

std::optional<std::string> AshaPruner::check(Trial& trial, const std::vector<Trial>& all) {
  if (trial.intermediate.empty()) return std::nullopt;
  const auto [step, raw] = trial.intermediate.back();
  const double value = std::isfinite(raw) ? sign_ * raw : std::numeric_limits<double>::infinity();
  int64_t r_min = options_.min_resource;
  if (r_min <= 0) {
    r_min = std::numeric_limits<int64_t>::max();
    for (const auto& t : all)
      for (const auto& [s, v] : t.intermediate) r_min = std::min(r_min, s);
    r_min = std::max<int64_t>(r_min, 1);
  }
  const int64_t eta = options_.reduction_factor;
  while (true) {
    const size_t rung = trial.rungs.size();
    double resource = static_cast<double>(r_min) * std::pow(static_cast<double>(eta), static_cast<double>(rung));
    if (static_cast<double>(step) < resource) return std::nullopt;
    trial.rungs.push_back(value);
    std::vector<double> competing = {value};
    for (const auto& t : all)
      if (t.id != trial.id && t.rungs.size() > rung) competing.push_back(t.rungs[rung]);
    std::sort(competing.begin(), competing.end());
    const int64_t promotable = std::max<int64_t>(static_cast<int64_t>(competing.size()) / eta - 1, 0);
    const double cutoff = competing[static_cast<size_t>(promotable)];
    if (value > cutoff) {
      return c10::str("asha: at rung ", rung, " (step >= ", static_cast<int64_t>(resource), ") value ", sign_ * value,
                      " is not in the top 1/", eta, " of ", competing.size(), " trials (cut-off ", sign_ * cutoff, ")");
    }
  }
}

std::unique_ptr<Pruner> make_pruner(const std::string& name, const PrunerOptions& options, double sign) {
  XTRAIN_USAGE_CHECK(options.reduction_factor >= 2, "tune: the ASHA reduction factor must be >= 2, got ",
                     options.reduction_factor);
  if (name == "none") return nullptr;
  if (name == "median") return std::make_unique<MedianPruner>(options, sign);
  if (name == "asha") return std::make_unique<AshaPruner>(options, sign);
  XTRAIN_USAGE_ERROR("tune: unknown pruner '", name, "'", did_you_mean_suffix(name, {"median", "asha", "none"}),
                     "; use median, asha or none");
}

}  // namespace xtrain::tune
