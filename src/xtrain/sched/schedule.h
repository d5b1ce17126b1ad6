// Learning-rate schedules as pure functions of the number of completed optimizer steps, with
// DeepSpeed's exact formulas (reference/deepspeed.md §a.3). The optimizer's k-th step (k = 1, 2,
// …) uses lr_after(k - 1): lr_after(0) is the value DeepSpeed writes at construction. The Adaptive
// schedule also watches the loss (observe) and keeps a small state for checkpoints.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/sched/options.h"

namespace xtrain::sched {

// A decision the adaptive schedule made, for the metrics.
struct Decision {
  int64_t step = 0;
  std::string what;  // "cut", "patience", …
  double lr = 0.0;
  double smoothed_loss = 0.0;
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  // lr in the optimizer after n scheduler steps (n = 0: at construction).
  virtual double lr_after(int64_t n) const = 0;
  // OneCycle momentum cycling: (beta1, beta2) after n steps; {-1, -1} when the schedule has none.
  virtual std::pair<double, double> betas_after(int64_t n) const { return {-1.0, -1.0}; }
  // Adaptive only: the training loss of optimizer step n (1-based). Others ignore it.
  virtual void observe(int64_t n, double loss) {}
  // Decisions taken since the last call (Adaptive), for the metrics.
  virtual std::vector<Decision> take_decisions() { return {}; }
  // Opaque state (JSON text) for checkpoints; "" for stateless schedules.
  virtual std::string state_json() const { return ""; }
  virtual void load_state_json(const std::string& state) {}
};

// type "" gives a constant schedule at base_lr. base_lr is the optimizer's configured lr
// (WarmupCosineLR multiplies it; the others carry their own lr values).
std::unique_ptr<Schedule> make_schedule(const SchedulerOptions& options, double base_lr);

}  // namespace xtrain::sched
