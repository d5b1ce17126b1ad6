// xtrain's "Adaptive" schedule: linear warm-up, then cuts of the lr when the smoothed loss stops
// improving, with growing patience. Its one design choice: it keeps the list of cuts, so lr_after(n)
// stays a function of n (given the observed history) like every other schedule, and the state is a
// few numbers plus that list (state_json round-trips exactly). The rules are on the class.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/sched/options.h"
#include "xtrain/sched/schedule.h"

namespace xtrain::sched {

// Warm-up: step k (1-based) uses peak * min(1, k/W); unlike WarmupLR it never spends a step at 0.
// Smoothing: the bias-corrected EMA of the loss, s_k = ema_k / (1 - smoothing^k); non-finite
// losses are ignored. From step W on the best s is tracked; a step improves when
// best - s > threshold * |best|. After `patience` steps without improvement the lr is cut to
// max(min_lr, lr * factor), the patience becomes patience * patience_growth rounded half up, best
// restarts at the current s, and `cooldown` steps pass before steps count again. At min_lr the
// cuts stop. Decisions: "warmup_done", "cut", "patience:<new patience>", "floor".
class AdaptiveSchedule final : public Schedule {
 public:
  AdaptiveSchedule(const AdaptiveParams& params, double peak_lr);
  double lr_after(int64_t n) const override;
  void observe(int64_t n, double loss) override;
  std::vector<Decision> take_decisions() override;
  std::string state_json() const override;
  void load_state_json(const std::string& state) override;

 private:
  void decide(int64_t n);
  void cut(int64_t n);

  AdaptiveParams p_;
  double peak_lr_;
  // State (all in state_json).
  double lr_;                  // current post-warm-up lr
  double ema_ = 0.0;           // un-debiased EMA of the loss
  int64_t count_ = 0;          // finite losses in the EMA
  double smoothed_ = 0.0;      // ema_ / (1 - smoothing^count_)
  bool tracking_ = false;      // past warm-up, best_ valid
  double best_ = 0.0;
  int64_t wait_ = 0;           // steps since the last improvement
  int64_t cooldown_left_ = 0;
  int64_t patience_;
  bool at_floor_ = false;
  int64_t last_step_ = 0;      // last observed step
  std::vector<std::pair<int64_t, double>> cuts_;  // (step, lr from then on)
  std::vector<Decision> pending_;  // not checkpointed: metrics only
};

}  // namespace xtrain::sched
