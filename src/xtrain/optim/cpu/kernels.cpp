// Compiles kernel_bodies.h three times (scalar, AVX2, AVX-512) and dispatches at run time on
// __builtin_cpu_supports. Contraction of a*b+c into FMA is off in this file, so the only FMAs are
// the explicit ones and every ISA rounds identically. Checked with objdump -d: the AVX-512 loops
// of adam/sgd/lamb run on zmm registers (vfmadd231ps/vdivps/vsqrtps zmm), the AVX2 ones on ymm.
#include "xtrain/optim/cpu/kernels.h"

#include <c10/util/Exception.h>

#include <atomic>

#include "xtrain/optim/cpu/simd.h"
#include "xtrain/optim/cpu/typed_buffers.h"

#pragma GCC optimize("fp-contract=off")
// GCC 12 false positive inside its own _mm512_undefined_ps (avx512fintrin.h: `__m512 __Y = __Y;`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace xtrain::optim::cpu {

namespace scalar_impl {
using V = VecScalar;
#include "xtrain/optim/cpu/kernel_bodies.h"
}  // namespace scalar_impl

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2_impl {
using V = VecAvx2;
#include "xtrain/optim/cpu/kernel_bodies.h"
}  // namespace avx2_impl
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
namespace avx512_impl {
using V = VecAvx512;
#include "xtrain/optim/cpu/kernel_bodies.h"
}  // namespace avx512_impl
#pragma GCC pop_options

namespace {
base::IsaSwitch& isa_switch() {
  static base::IsaSwitch s("optim");
  return s;
}
}  // namespace

Isa best_isa() { return base::best_cpu_isa(); }
Isa active_isa() { return isa_switch().active(); }
Isa force_isa(Isa isa) { return isa_switch().force(isa); }

#define XTRAIN_OPTIM_DISPATCH(fn, ...)                                   \
  switch (active_isa()) {                                                \
    case Isa::kAvx512: return avx512_impl::fn(__VA_ARGS__);              \
    case Isa::kAvx2: return avx2_impl::fn(__VA_ARGS__);                  \
    default: return scalar_impl::fn(__VA_ARGS__);                        \
  }

void adam_update(const AdamCoeffs& c, const FlatBuffers& b, int64_t begin, int64_t end) {
  XTRAIN_OPTIM_DISPATCH(adam, c, b, begin, end)
}

void sgd_update(const SgdCoeffs& c, const FlatBuffers& b, int64_t begin, int64_t end) {
  XTRAIN_OPTIM_DISPATCH(sgd, c, b, begin, end)
}

std::pair<double, double> lamb_moments(const LambCoeffs& c, const FlatBuffers& b, int64_t begin, int64_t end) {
  XTRAIN_OPTIM_DISPATCH(lamb_norms, c, b, begin, end)
}

void lamb_apply(const LambCoeffs& c, float neg_scaled_lr, const FlatBuffers& b, int64_t begin, int64_t end) {
  XTRAIN_OPTIM_DISPATCH(lamb_step, c, neg_scaled_lr, b, begin, end)
}

#undef XTRAIN_OPTIM_DISPATCH

}  // namespace xtrain::optim::cpu
