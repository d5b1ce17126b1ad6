// The fused CPU optimizer kernels over one range [begin, end) of flat buffers: raw pointers and
// per-step coefficients, no tensors. One pass reads the gradient (fp32/bf16/fp16), scales it,
// updates the moments and the fp32 parameter and writes its bf16/fp16 copy. The widest ISA the CPU
// has is picked at run time (AVX-512, AVX2, scalar); all give bit-identical results, except the
// lane order of LAMB's norm sums. Coefficients are fp32, computed in double by the caller.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <utility>

#include "xtrain/base/cpu_isa.h"

namespace xtrain::optim::cpu {

using base::Isa;
using base::isa_name;
Isa best_isa();    // the widest this CPU supports
Isa active_isa();  // the one in use (best_isa() unless forced)
// Tests and benchmarks: use `isa` (must be <= best_isa()); returns the previous one.
Isa force_isa(Isa isa);

// Views of the flat buffers (all `numel` long); indices passed to the kernels are absolute.
struct FlatBuffers {
  float* params = nullptr;
  const void* grads = nullptr;
  c10::ScalarType grad_type = c10::ScalarType::Float;  // Float, BFloat16 or Half
  float* state0 = nullptr;  // exp_avg, or SGD's momentum buffer
  float* state1 = nullptr;  // exp_avg_sq
  void* lowp = nullptr;     // optional copy of params
  c10::ScalarType lowp_type = c10::ScalarType::BFloat16;  // BFloat16 or Half
};

// torch.optim.Adam/AdamW: g = g*grad_scale + l2*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// p = p*decay_mul - step_size * m / (sqrt(v)/bc2_sqrt + eps). AdamW: l2 = 0, decay_mul = 1-lr*wd;
// Adam (L2): l2 = wd, decay_mul = 1.
struct AdamCoeffs {
  float grad_scale, l2, decay_mul, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
};
void adam_update(const AdamCoeffs& c, const FlatBuffers& b, int64_t begin, int64_t end);

// torch.optim.SGD: d = g*grad_scale + wd*p; buf = d (first step) or momentum*buf + (1-dampening)*d;
// d = nesterov ? d + momentum*buf : buf; p -= lr*d. state0 is the buffer (unused without momentum).
struct SgdCoeffs {
  float grad_scale, weight_decay, momentum, one_minus_dampening, neg_lr;
  bool use_momentum, first_step, nesterov;
};
void sgd_update(const SgdCoeffs& c, const FlatBuffers& b, int64_t begin, int64_t end);

// DeepSpeed FusedLamb, pass 1: m, v updated in place; u = m/(sqrt(v)+eps) (or m/sqrt(v+eps)) + wd*p.
// Returns (sum p^2, sum u^2) over the range, p before the update.
struct LambCoeffs {
  float grad_scale, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  bool eps_inside_sqrt;
};
std::pair<double, double> lamb_moments(const LambCoeffs& c, const FlatBuffers& b, int64_t begin, int64_t end);
// Pass 2: recomputes u from p, m, v and sets p += neg_scaled_lr * u (neg_scaled_lr = -step_size*ratio).
void lamb_apply(const LambCoeffs& c, float neg_scaled_lr, const FlatBuffers& b, int64_t begin, int64_t end);

}  // namespace xtrain::optim::cpu
