// The vector types the fused CPU attention kernels are written against: VecScalar<T> (1 lane, fp32
// or fp64: the portable spec and the float64 gradcheck path), VecAvx2 (8 fp32 lanes) and VecAvx512
// (16 fp32 lanes). Each offers the same few operations, so tile_engine_body.h is compiled once per
// width (tile_engine.cpp). Design choice: exp is our own (Cephes expf polynomial, ~2 ulp), so every
// ISA computes the softmax the same way; inputs below -87.3 (and -inf) give exactly 0.
// Internal to kernels/attention/cpu: include only from .cpp files (it pulls <immintrin.h>).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace xtrain::kernels::attention::cpu {

template <typename T>
struct VecScalar {
  using Elem = T;
  using R = T;
  static constexpr int kWidth = 1;
  static constexpr int kMaxVecs = 4;  // GEMM micro-tile: vectors of C per row
  static constexpr int rows_for(int) { return 4; }  // and rows of C per pass
  static R zero() { return T(0); }
  static R set1(T x) { return x; }
  static R load(const T* p) { return *p; }
  static R load_n(const T* p, int n) { return n > 0 ? *p : T(0); }
  static void store(T* p, R x) { *p = x; }
  static void store_n(T* p, R x, int n) {
    if (n > 0) *p = x;
  }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R max(R a, R b) { return a > b ? a : b; }
  static R fmadd(R a, R b, R c) { return a * b + c; }
  static R exp(R x) { return std::exp(x); }
  static T reduce_add(R a) { return a; }
  static T reduce_max(R a) { return a; }
  // Lane l keeps x when lo[l] <= r < hi[l], else becomes `fill`.
  static R keep_rows(R x, int32_t r, const int32_t* lo, const int32_t* hi, T fill) {
    return (lo[0] <= r && r < hi[0]) ? x : fill;
  }
  // -inf lanes become 0.
  static R finite_or_zero(R x) { return x == -std::numeric_limits<T>::infinity() ? T(0) : x; }
};

#pragma GCC push_options
#pragma GCC target("avx2,fma")
struct VecAvx2 {
  using Elem = float;
  using R = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kMaxVecs = 2;
  // 4 x 2 accumulators + 2 vectors of B + 1 broadcast within 16 ymm registers.
  static constexpr int rows_for(int) { return 4; }
  static __m256i lane_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load_n(const float* p, int n) { return n >= kWidth ? load(p) : _mm256_maskload_ps(p, lane_mask(n)); }
  static void store(float* p, R x) { _mm256_storeu_ps(p, x); }
  static void store_n(float* p, R x, int n) {
    if (n >= kWidth) {
      store(p, x);
    } else {
      _mm256_maskstore_ps(p, lane_mask(n), x);
    }
  }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R exp(R x) {
    const R tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const R n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    R p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  }
  static float reduce_add(R a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(R a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static R keep_rows(R x, int32_t r, const int32_t* lo, const int32_t* hi, float fill) {
    const __m256i rv = _mm256_set1_epi32(r);
    const __m256i lov = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo));
    const __m256i hiv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi));
    const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(lov, rv), _mm256_cmpgt_epi32(hiv, rv));
    return _mm256_blendv_ps(_mm256_set1_ps(fill), x, _mm256_castsi256_ps(in));
  }
  static R finite_or_zero(R x) {
    const R ninf = _mm256_cmp_ps(x, _mm256_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_EQ_OQ);
    return _mm256_andnot_ps(ninf, x);
  }
};
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")
struct VecAvx512 {
  using Elem = float;
  using R = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kMaxVecs = 4;
  // 6 x 4 accumulators + 4 vectors of B + 1 broadcast within 32 zmm registers.
  static constexpr int rows_for(int) { return 6; }
  static __mmask16 lane_mask(int n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max(n, 0)) - 1u); }
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load_n(const float* p, int n) { return n >= kWidth ? load(p) : _mm512_maskz_loadu_ps(lane_mask(n), p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static void store_n(float* p, R x, int n) {
    if (n >= kWidth) {
      store(p, x);
    } else {
      _mm512_mask_storeu_ps(p, lane_mask(n), x);
    }
  }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R exp(R x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    const R n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    R p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps(static_cast<__mmask16>(~tiny), p, n);
  }
  static float reduce_add(R a) { return _mm512_reduce_add_ps(a); }
  static float reduce_max(R a) { return _mm512_reduce_max_ps(a); }
  static R keep_rows(R x, int32_t r, const int32_t* lo, const int32_t* hi, float fill) {
    const __m512i rv = _mm512_set1_epi32(r);
    const __mmask16 in = _mm512_cmp_epi32_mask(_mm512_loadu_si512(lo), rv, _MM_CMPINT_LE) &
                         _mm512_cmp_epi32_mask(rv, _mm512_loadu_si512(hi), _MM_CMPINT_LT);
    return _mm512_mask_blend_ps(in, _mm512_set1_ps(fill), x);
  }
  static R finite_or_zero(R x) {
    const __mmask16 ninf =
        _mm512_cmp_ps_mask(x, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_EQ_OQ);
    return _mm512_mask_blend_ps(ninf, x, _mm512_setzero_ps());
  }
};
#pragma GCC pop_options

}  // namespace xtrain::kernels::attention::cpu
