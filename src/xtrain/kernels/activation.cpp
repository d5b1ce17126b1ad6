// kernels::gelu_tanh (activation.h). AVX-512 body; the exp is the attention kernels' Cephes
// polynomial (kernels/attention/cpu/vec.h), bf16 is widened exactly and rounded to nearest even.
#include "xtrain/kernels/activation.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <c10/util/BFloat16.h>
#include <torch/csrc/autograd/custom_function.h>

#include "xtrain/base/cpu_isa.h"
#include "xtrain/kernels/attention/cpu/vec.h"
#include "xtrain/kernels/attention/dropout_hash.h"

// GCC 12 false positive inside its own _mm512_undefined_* (avx512fintrin.h: `__m512i __Y = __Y;`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace xtrain::kernels {
namespace {

using V = attention::cpu::VecAvx512;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr int64_t kGrain = 16384;

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")

// 16 lanes in and out of memory as fp32.
inline __m512 load16(const float* p, int n) { return V::load_n(p, n); }
inline __m512 load16(const c10::BFloat16* p, int n) {
  const __m256i h = _mm256_maskz_loadu_epi16(V::lane_mask(n), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline void store16(float* p, __m512 v, int n) { V::store_n(p, v, n); }
inline void store16(c10::BFloat16* p, __m512 v, int n) {
  // Round to nearest even; NaN stays NaN (quietened).
  __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7FC00000));
  _mm256_mask_storeu_epi16(p, V::lane_mask(n), _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16)));
}

// σ(2u) for u = √(2/π)(x + 0.044715x³), and du/dx when `du` is non-null.
inline __m512 sigma2u(__m512 x, __m512* du) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 inner = _mm512_fmadd_ps(_mm512_set1_ps(kCubic), x2, _mm512_set1_ps(1.0f));  // 1 + c·x²
  const __m512 u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi), x), inner);
  if (du) *du = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi), _mm512_fmadd_ps(_mm512_set1_ps(3 * kCubic), x2, _mm512_set1_ps(1.0f)));
  const __m512 e = V::exp(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));  // clamped: exact 0 below -87.3
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

template <typename T>
void forward_range(const T* x, T* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, end - i));
    const __m512 v = load16(x + i, n);
    store16(y + i, _mm512_mul_ps(v, sigma2u(v, nullptr)), n);
  }
}

// d/dx [x·s] = s + x·s(1−s)·2·du/dx.
template <typename T>
void backward_range(const T* g, const T* x, T* gx, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, end - i));
    const __m512 v = load16(x + i, n);
    __m512 du;
    const __m512 s = sigma2u(v, &du);
    const __m512 ds = _mm512_mul_ps(_mm512_mul_ps(s, _mm512_sub_ps(_mm512_set1_ps(1.0f), s)), _mm512_add_ps(du, du));
    const __m512 d = _mm512_fmadd_ps(v, ds, s);
    store16(gx + i, _mm512_mul_ps(load16(g + i, n), d), n);
  }
}

#pragma GCC pop_options

bool fused(const at::Tensor& x) {
  static const bool avx512 = base::best_cpu_isa() == base::Isa::kAvx512;
  return avx512 && x.device().is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16);
}

template <typename F>
void for_each_chunk(int64_t n, const F& f) {
  at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) { f(b, e); });
}

class GeluTanhFunction : public torch::autograd::Function<GeluTanhFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    return gelu_tanh_forward(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {gelu_tanh_backward(grads[0], ctx->get_saved_variables()[0])};
  }
};

}  // namespace

at::Tensor gelu_tanh_forward(const at::Tensor& x) {
  if (!fused(x)) return at::gelu(x, "tanh");
  const auto xc = x.contiguous();
  auto y = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (xc.scalar_type() == at::kFloat) {
    for_each_chunk(n, [&](int64_t b, int64_t e) { forward_range(xc.data_ptr<float>(), y.data_ptr<float>(), b, e); });
  } else {
    for_each_chunk(n, [&](int64_t b, int64_t e) {
      forward_range(xc.data_ptr<c10::BFloat16>(), y.data_ptr<c10::BFloat16>(), b, e);
    });
  }
  return y;
}

at::Tensor gelu_tanh_backward(const at::Tensor& grad, const at::Tensor& x) {
  if (!fused(x) || grad.scalar_type() != x.scalar_type()) return at::gelu_backward(grad, x, "tanh");
  const auto xc = x.contiguous(), gc = grad.contiguous();
  auto gx = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (xc.scalar_type() == at::kFloat) {
    for_each_chunk(n, [&](int64_t b, int64_t e) {
      backward_range(gc.data_ptr<float>(), xc.data_ptr<float>(), gx.data_ptr<float>(), b, e);
    });
  } else {
    for_each_chunk(n, [&](int64_t b, int64_t e) {
      backward_range(gc.data_ptr<c10::BFloat16>(), xc.data_ptr<c10::BFloat16>(), gx.data_ptr<c10::BFloat16>(), b, e);
    });
  }
  return gx;
}

at::Tensor gelu_tanh(const at::Tensor& x) { return GeluTanhFunction::apply(x); }

namespace {

// One hash gives the 32-bit draws of two neighbouring elements; keep when draw >= threshold.
template <typename T>
void dropout_range(const T* x, T* y, int64_t begin, int64_t end, uint64_t seed, uint32_t threshold, float scale) {
  const uint64_t base = attention::mix64(seed + 0x9E3779B97F4A7C15ull);
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t bits = attention::mix64(base ^ (static_cast<uint64_t>(i >> 1) * 0xD1B54A32D192ED03ull));
    const uint32_t draw = static_cast<uint32_t>((i & 1) ? bits >> 32 : bits);
    y[i] = draw >= threshold ? static_cast<T>(static_cast<float>(x[i]) * scale) : static_cast<T>(0.0f);
  }
}

bool fused_dropout(const at::Tensor& x) {
  return x.device().is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16);
}

uint64_t draw_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double p) {
    const uint64_t seed = draw_seed();
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);
    return dropout_with_seed(x, p, seed);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const double p = ctx->saved_data["p"].toDouble();
    const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    return {dropout_with_seed(grads[0], p, seed), at::Tensor()};
  }
};

}  // namespace

at::Tensor dropout_with_seed(const at::Tensor& x, double p, uint64_t seed) {
  TORCH_CHECK(fused_dropout(x), "kernels::dropout_with_seed: fp32 or bf16 CPU tensors, got ", x.options());
  TORCH_CHECK(p >= 0 && p < 1, "kernels::dropout: p must be in [0, 1), got ", p);
  const auto xc = x.contiguous();
  auto y = at::empty_like(xc);
  // 2^32 steps: the draw is a uniform 32-bit integer.
  const auto threshold = static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0));
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  const int64_t n = xc.numel();
  at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    if (xc.scalar_type() == at::kFloat) {
      dropout_range(xc.data_ptr<float>(), y.data_ptr<float>(), b, e, seed, threshold, scale);
    } else {
      dropout_range(xc.data_ptr<c10::BFloat16>(), y.data_ptr<c10::BFloat16>(), b, e, seed, threshold, scale);
    }
  });
  return y;
}

at::Tensor dropout(const at::Tensor& x, double p, bool train) {
  if (!train || p == 0) return x;
  if (!fused_dropout(x)) return at::dropout(x, p, train);
  return DropoutFunction::apply(x, p);
}

}  // namespace xtrain::kernels
