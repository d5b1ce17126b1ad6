// The three vector widths the CPU optimizer kernels are written against: VecScalar (1 lane, the
// portable spec), VecAvx2 (8 lanes) and VecAvx512 (16 lanes). Each offers the same handful of
// operations, so one kernel body (kernel_bodies.h) is compiled once per width and every width
// performs the same IEEE operations in the same order: results are bit-identical across ISAs.
// bf16 stores round to nearest even with NaN -> 0x7FC0, exactly as c10::BFloat16(float).
// Internal to optim/cpu: include only from .cpp files (it pulls <immintrin.h>).
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include <cmath>

namespace xtrain::optim::cpu {

struct VecScalar {
  using R = float;
  static constexpr int kWidth = 1;
  static R set1(float x) { return x; }
  static R load(const float* p) { return *p; }
  static R load(const c10::BFloat16* p) { return static_cast<float>(*p); }
  static R load(const c10::Half* p) { return static_cast<float>(*p); }
  static void store(float* p, R x) { *p = x; }
  static void store(c10::BFloat16* p, R x) { *p = c10::BFloat16(x); }
  static void store(c10::Half* p, R x) { *p = c10::Half(x); }
  static R add(R a, R b) { return a + b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R sqrt(R a) { return std::sqrt(a); }
  static R fmadd(R a, R b, R c) { return std::fma(a, b, c); }  // a * b + c, one rounding
  static double sum_lanes(R a) { return a; }
};

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
struct VecAvx2 {
  using R = __m256;
  static constexpr int kWidth = 8;
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load(const c10::BFloat16* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static R load(const c10::Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(float* p, R x) { _mm256_storeu_ps(p, x); }
  static void store(c10::BFloat16* p, R x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  static void store(c10::Half* p, R x) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static double sum_lanes(R a) {
    alignas(32) float t[kWidth];
    _mm256_store_ps(t, a);
    double s = 0;
    for (float x : t) s += x;
    return s;
  }
};
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
struct VecAvx512 {
  using R = __m512;
  static constexpr int kWidth = 16;
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load(const c10::BFloat16* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static R load(const c10::Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static void store(c10::BFloat16* p, R x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
  static void store(c10::Half* p, R x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static double sum_lanes(R a) {
    alignas(64) float t[kWidth];
    _mm512_store_ps(t, a);
    double s = 0;
    for (float x : t) s += x;
    return s;
  }
};
#pragma GCC pop_options

}  // namespace xtrain::optim::cpu
