// Early stopping of trials on their intermediate values. MedianPruner is the median stopping rule
// (Golovin et al. 2017, "Google Vizier"; Optuna's MedianPruner): stop a trial whose best value so
// far is worse than the median of the completed trials' values at the same step. AshaPruner is
// asynchronous successive halving (Li et al. 2018, "Massively Parallel Hyperparameter Tuning";
// Optuna's SuccessiveHalvingPruner): at rungs r_min·η^k a trial continues only if its value is in
// the top 1/η of all values recorded at that rung so far. Pruners see values to be minimised.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xtrain/tune/trial.h"

namespace xtrain::tune {

struct PrunerOptions {
  // median
  int64_t startup_trials = 5;  // completed trials needed before anything is stopped
  int64_t warmup_steps = 0;    // never stop before this step
  // asha
  int64_t min_resource = 0;      // first rung's step; 0 = the smallest step any trial has reported
  int64_t reduction_factor = 3;  // η
};

class Pruner {
 public:
  virtual ~Pruner() = default;
  virtual std::string name() const = 0;
  // Called after `trial` reported a new intermediate value (its last entry). `all` is every trial
  // of the study, `trial` included (compared by id). Returns the reason to stop it, or nullopt.
  // ASHA records the trial's rung values in trial.rungs.
  virtual std::optional<std::string> check(Trial& trial, const std::vector<Trial>& all) = 0;
};

// sign = +1 to minimise the metric, -1 to maximise it.
class MedianPruner : public Pruner {
 public:
  MedianPruner(PrunerOptions options, double sign) : options_(options), sign_(sign) {}
  std::string name() const override { return "median"; }
  std::optional<std::string> check(Trial& trial, const std::vector<Trial>& all) override;

 private:
  PrunerOptions options_;
  double sign_;
};

class AshaPruner : public Pruner {
 public:
  AshaPruner(PrunerOptions options, double sign) : options_(options), sign_(sign) {}
  std::string name() const override { return "asha"; }
  std::optional<std::string> check(Trial& trial, const std::vector<Trial>& all) override;

 private:
  PrunerOptions options_;
  double sign_;
};

// "median", "asha", or "none" (nullptr); UsageError otherwise.
std::unique_ptr<Pruner> make_pruner(const std::string& name, const PrunerOptions& options, double sign);

}  // namespace xtrain::tune
