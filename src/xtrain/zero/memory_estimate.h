// Model-state bytes per rank predicted by the ZeRO paper (Rajbhandari et al. 2020, §3-5): for Ψ
// parameters, N data-parallel ranks, P bytes per model parameter and gradient, and K bytes of
// optimizer state per parameter (fp32 master 4 + Adam's two moments 8 = 12 with mixed precision;
// without mixed precision the parameters are the master, so K = 8). Stage 0: (2P + K)Ψ; stage 1:
// 2PΨ + KΨ/N; stage 2: PΨ + (P + K)Ψ/N; stage 3: (2P + K)Ψ/N. Activations are not model state.
#pragma once
#include <cstdint>

#include "xtrain/zero/strategy.h"

namespace xtrain::zero {

// `param_bytes`: bytes per parameter of the model's dtype; `state_floats`: fp32 values of optimizer
// state per parameter (2 for Adam, 1 for SGD with momentum).
MemoryReport estimate_memory(int64_t stage, int64_t psi, int64_t world, int64_t param_bytes, int64_t state_floats);

}  // namespace xtrain::zero
