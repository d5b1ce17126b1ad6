// Loss scaling for fp16: DeepSpeed's ZeRO-path DynamicLossScaler, rule for rule
// (reference/deepspeed.md §a.4: hysteresis, window doubling, consecutive hysteresis, minimum
// scale), or a static scale when fp16.loss_scale > 0. update() is called once per optimizer step
// with "did any gradient overflow". Unlike DeepSpeed, the defaults are always the documented key
// defaults (2^16, window 1000, hysteresis 2, min 1) — DeepSpeed's ZeRO path silently uses 2^32 and
// hysteresis 1 when no scaler key is given.
#pragma once
#include <cstdint>
#include <string>

#include "xtrain/precision/options.h"

namespace xtrain::precision {

struct ScalerUpdate {
  bool skipped = false;      // this step's update must not be applied
  bool scale_changed = false;
  std::string message;       // what happened, for the log ("overflow: scale 65536 -> 32768")
};

class LossScaler {
 public:
  // Disabled (scale 1, never overflows) unless options.enabled.
  explicit LossScaler(const Fp16Options& options);
  bool enabled() const { return enabled_; }
  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  int64_t hysteresis_left() const { return cur_hysteresis_; }
  // One optimizer step's verdict. At the minimum scale with no hysteresis left, an overflow is a
  // UsageError that says what to try (bf16, a lower lr, a higher min_loss_scale).
  ScalerUpdate update(bool overflow);

  std::string state_json() const;
  void load_state_json(const std::string& json);

 private:
  bool enabled_ = false, dynamic_ = false;
  double scale_ = 1.0, min_scale_ = 1.0;
  int64_t window_ = 1000, hysteresis_ = 2, cur_hysteresis_ = 2;
  bool consecutive_hysteresis_ = false;
  int64_t cur_iter_ = 0, last_overflow_iter_ = -1;
};

}  // namespace xtrain::precision
