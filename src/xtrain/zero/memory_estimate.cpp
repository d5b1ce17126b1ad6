#include "xtrain/zero/memory_estimate.h"

#include "xtrain/base/error.h"

namespace xtrain::zero {

MemoryReport estimate_memory(int64_t stage, int64_t psi, int64_t world, int64_t param_bytes, int64_t state_floats) {
  TORCH_INTERNAL_ASSERT(stage >= 0 && stage <= 3 && world > 0);
  const bool mixed = param_bytes != 4;
  const auto part = [&](int64_t bytes_per_param, bool partitioned) {
    return partitioned ? bytes_per_param * psi / world : bytes_per_param * psi;
  };
  MemoryReport r;
  r.param_bytes = part(param_bytes, stage >= 3);
  r.grad_bytes = part(param_bytes, stage >= 2);
  r.master_bytes = mixed ? part(4, stage >= 1) : 0;
  r.optimizer_bytes = part(4 * state_floats, stage >= 1);
  return r;
}

}  // namespace xtrain::zero
