// Block-wise 8-bit moments for Adam/AdamW (optimizer.params.state_dtype "int8"; the optimizer is
// adam.h's Adam, this is its state strategy): exp_avg and exp_avg_sq held as one byte per value
// plus one fp32 absmax per block of cpu::kQuantBlock (2048) values of the flat buffer
// (cpu/quant8.h: bitsandbytes' dynamic map). Each step dequantises a block into registers/L1,
// updates it in fp32, takes the new absmax and requantises; blocks run in parallel, one thread per
// block, so results never depend on the thread count. Blocks are cut from element 0 of the buffers
// the optimizer is given: under ZeRO that is the rank's shard, so a block never spans two ranks.
// CPU only.
//
// state(): "exp_avg" (int8 [numel]), "exp_avg_sq" (uint8 [numel]), "exp_avg_absmax" and
// "exp_avg_sq_absmax" (fp32 [ceil(numel / 2048)]): not per-element fp32 like the other
// optimizers' state, so checkpoints hold them whole per rank (zero/quantized_state_io.h).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/adam.h"

namespace xtrain::optim {

std::unique_ptr<AdamMoments> int8_adam_moments();

// Adam with 8-bit moments whatever params.state_dtype says (tests and benchmarks build it directly).
class Adam8bit final : public Adam {
 public:
  Adam8bit(const AdamParams& params, bool decoupled, std::string name)
      : Adam(params, decoupled, std::move(name), int8_adam_moments()) {}
};

// True when `state` (an optimizer's state()) is not one fp32 value per element of `numel` (the
// 8-bit state): it cannot be cut by parameter and is saved whole.
bool state_is_blockwise(const std::vector<std::pair<std::string, at::Tensor>>& state, int64_t numel);

}  // namespace xtrain::optim
