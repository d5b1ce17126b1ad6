// Adam/AdamW with block-wise 8-bit moments (optimizer.params.state_dtype "int8"): the update of
// adam.h, with exp_avg and exp_avg_sq held as one byte per value plus one fp32 absmax per block of
// cpu::kQuantBlock (2048) values of the flat buffer (cpu/quant8.h: bitsandbytes' dynamic map).
// Each step dequantises a block into registers/L1, updates it in fp32, takes the new absmax and
// requantises; blocks run in parallel, one thread per block, so results never depend on the
// thread count. Blocks are cut from element 0 of the buffers the optimizer is given: under ZeRO
// that is the rank's shard, so a block never spans two ranks. CPU only.
//
// state(): "exp_avg" (int8 [numel]), "exp_avg_sq" (uint8 [numel]), "exp_avg_absmax" and
// "exp_avg_sq_absmax" (fp32 [ceil(numel / 2048)]): not per-element fp32 like the other
// optimizers' state, so checkpoints hold them whole per rank (zero/quantized_state_io.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/optimizer.h"

namespace xtrain::optim {

class Adam8bit final : public Optimizer {
 public:
  Adam8bit(const AdamParams& params, bool decoupled, std::string name);
  std::string name() const override { return name_; }
  void init_state(int64_t numel) override;
  void step(const StepInputs& in) override;
  std::vector<std::pair<std::string, at::Tensor>> state() override;

 private:
  AdamParams params_;
  bool decoupled_;
  std::string name_;
  at::Tensor exp_avg_, exp_avg_sq_, exp_avg_absmax_, exp_avg_sq_absmax_;
};

// True when `state` (an optimizer's state()) is not one fp32 value per element of `numel` (the
// 8-bit state): it cannot be cut by parameter and is saved whole.
bool state_is_blockwise(const std::vector<std::pair<std::string, at::Tensor>>& state, int64_t numel);

}  // namespace xtrain::optim
