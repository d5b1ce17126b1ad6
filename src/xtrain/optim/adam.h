// Adam and AdamW over flat buffers with torch.optim semantics: decoupled decay (p *= 1 - lr*wd,
// then the Adam update) when adam_w_mode, else L2 (g += wd*p); eps outside the square root;
// bias_correction = false drops the 1 - beta^t divisions (DeepSpeed FusedAdam).
//
// One optimizer, two ways to keep the moments (optimizer.params.state_dtype), as a strategy
// (AdamMoments): "fp32" keeps exp_avg and exp_avg_sq as fp32 flat buffers, stepped in one fused
// pass on the CPU or (CUDA LibTorch) on the params' GPU, the state following the params' device;
// "int8" keeps them block-wise 8-bit (adam8bit.h, CPU only). Adam owns what both share: the
// hyper-parameters and per-group coefficients, the step count, the checks of StepInputs and the
// state names; the strategy owns the state tensors and the kernel that updates them.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/cpu/kernels.h"
#include "xtrain/optim/optimizer.h"

namespace xtrain::optim {

// Per-group coefficients of step `step_count + 1` (computed in double, as torch.optim does).
std::vector<cpu::AdamCoeffs> adam_coefficients(const AdamParams& params, bool decoupled, int64_t step_count,
                                               const StepInputs& in);

// Where and how Adam's moments are kept. update() runs the Adam update (cpu::AdamCoeffs' formula,
// one coefficient set per group) over every element of `segments` (already checked against numel()).
class AdamMoments {
 public:
  virtual ~AdamMoments() = default;
  virtual void init(int64_t numel) = 0;
  virtual int64_t numel() const = 0;  // -1 before init()
  virtual bool allows_cuda() const = 0;
  virtual std::string describe(const std::string& optimizer_name) const = 0;  // the name in errors
  virtual void update(const StepInputs& in, const std::vector<Segment>& segments,
                      const std::vector<cpu::AdamCoeffs>& coeffs) = 0;
  // "exp_avg", "exp_avg_sq", then any extra tensors (the 8-bit absmax), as Optimizer::state().
  virtual std::vector<std::pair<std::string, at::Tensor>> tensors() = 0;
};

// The fp32 moments; the 8-bit ones are int8_adam_moments() (adam8bit.h).
std::unique_ptr<AdamMoments> fp32_adam_moments();

class Adam : public Optimizer {
 public:
  // `name` is "Adam" or "AdamW"; `decoupled` is adam_w_mode (always true for AdamW). The moments
  // follow params.state_dtype ("fp32" or "int8"; the registry checks the value).
  Adam(const AdamParams& params, bool decoupled, std::string name);
  Adam(const AdamParams& params, bool decoupled, std::string name, std::unique_ptr<AdamMoments> moments);
  std::string name() const override { return name_; }
  void init_state(int64_t numel) override;
  void step(const StepInputs& in) override;
  std::vector<std::pair<std::string, at::Tensor>> state() override;

 private:
  AdamParams params_;
  bool decoupled_;
  std::string name_;
  std::unique_ptr<AdamMoments> moments_;
};

}  // namespace xtrain::optim
