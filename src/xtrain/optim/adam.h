// Adam and AdamW over flat buffers with torch.optim semantics: decoupled decay (p *= 1 - lr*wd,
// then the Adam update) when adam_w_mode, else L2 (g += wd*p); eps outside the square root;
// bias_correction = false drops the 1 - beta^t divisions (DeepSpeed FusedAdam). One fused pass,
// on the CPU or (CUDA LibTorch) on the params' GPU; the state moves to the params' device.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/cpu/kernels.h"
#include "xtrain/optim/optimizer.h"

namespace xtrain::optim {

// Per-group coefficients of step `step_count + 1` (computed in double, as torch.optim does); shared
// with the 8-bit Adam (adam8bit.h).
std::vector<cpu::AdamCoeffs> adam_coefficients(const AdamParams& params, bool decoupled, int64_t step_count,
                                               const StepInputs& in);

class Adam final : public Optimizer {
 public:
  // `name` is "Adam" or "AdamW"; `decoupled` is adam_w_mode (always true for AdamW).
  Adam(const AdamParams& params, bool decoupled, std::string name);
  std::string name() const override { return name_; }
  void init_state(int64_t numel) override;
  void step(const StepInputs& in) override;
  std::vector<std::pair<std::string, at::Tensor>> state() override;

 private:
  AdamParams params_;
  bool decoupled_;
  std::string name_;
  at::Tensor exp_avg_, exp_avg_sq_;
};

}  // namespace xtrain::optim
