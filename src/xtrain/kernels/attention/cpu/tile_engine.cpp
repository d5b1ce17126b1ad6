// Compiles tile_engine_body.h four times (fp32: scalar, AVX2, AVX-512; fp64: scalar) and picks the
// fp32 one at run time on __builtin_cpu_supports, as optim/cpu does. fp64 exists for gradcheck and
// the references' precision, not for speed.
#include "xtrain/kernels/attention/cpu/tile_engine.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "xtrain/kernels/attention/cpu/vec.h"
#include "xtrain/kernels/attention/dropout_hash.h"

// GCC 12 false positive inside its own _mm512_undefined_ps (avx512fintrin.h: `__m512 __Y = __Y;`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace xtrain::kernels::attention::cpu {

namespace scalar_impl {
using V = VecScalar<float>;
#include "xtrain/kernels/attention/cpu/tile_engine_body.h"
}  // namespace scalar_impl

namespace double_impl {
using V = VecScalar<double>;
#include "xtrain/kernels/attention/cpu/tile_engine_body.h"
}  // namespace double_impl

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2_impl {
using V = VecAvx2;
#include "xtrain/kernels/attention/cpu/tile_engine_body.h"
}  // namespace avx2_impl
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")
namespace avx512_impl {
using V = VecAvx512;
#include "xtrain/kernels/attention/cpu/tile_engine_body.h"
}  // namespace avx512_impl
#pragma GCC pop_options

namespace {
base::IsaSwitch& isa_switch() {
  static base::IsaSwitch s("attention");
  return s;
}
}  // namespace

Isa best_isa() { return base::best_cpu_isa(); }
Isa active_isa() { return isa_switch().active(); }
Isa force_isa(Isa isa) { return isa_switch().force(isa); }

void forward_block(const BlockArgs<float>& a, std::vector<float>& scratch) {
  switch (active_isa()) {
    case Isa::kAvx512: return avx512_impl::forward_block_impl(a, scratch);
    case Isa::kAvx2: return avx2_impl::forward_block_impl(a, scratch);
    default: return scalar_impl::forward_block_impl(a, scratch);
  }
}

void backward_block(const BlockArgs<float>& a, std::vector<float>& scratch) {
  switch (active_isa()) {
    case Isa::kAvx512: return avx512_impl::backward_block_impl(a, scratch);
    case Isa::kAvx2: return avx2_impl::backward_block_impl(a, scratch);
    default: return scalar_impl::backward_block_impl(a, scratch);
  }
}

void forward_block(const BlockArgs<double>& a, std::vector<double>& scratch) {
  double_impl::forward_block_impl(a, scratch);
}

void backward_block(const BlockArgs<double>& a, std::vector<double>& scratch) {
  double_impl::backward_block_impl(a, scratch);
}

}  // namespace xtrain::kernels::attention::cpu
