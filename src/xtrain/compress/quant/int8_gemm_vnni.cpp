// AVX-512 VNNI micro-kernels: a tile of MR rows (≤ 6) × NV column vectors (≤ 4 × 16 columns) keeps
// MR·NV int32 accumulators in zmm registers; per group of 4 k it loads NV weight vectors (16
// columns × 4 bytes) and broadcasts 4 activation bytes of each row, one vpdpbusd per pair. The
// epilogue converts to float and applies the per-column scale and offset (and ReLU) with masked
// stores for the last partial vector. Rows go in chunks of kRowChunk so a chunk of A stays in L2
// while every column group passes over it.
#include "xtrain/compress/quant/int8_gemm_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

// GCC 12 flags the intrinsics' internal _mm512_undefined_* operands (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define XTRAIN_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace xtrain::compress::vnni {

namespace {

constexpr int kMaxRows = 6;
constexpr int kMaxVecs = 4;
constexpr int64_t kRowChunk = 96;

XTRAIN_VNNI inline __m512i broadcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

struct TileArgs {
  const uint8_t* A;
  int64_t lda;
  const int8_t* B;  // first panel of the column group
  int64_t panel_bytes, groups;
  const float* cs;
  const float* co;
  bool relu;
  float* out;
  int64_t ldo;
  int64_t n_valid;  // columns of this group that exist (<= NV * 16)
  int32_t* acc32;
};

template <int MR, int NV>
XTRAIN_VNNI void tile(const TileArgs& t) {
  __m512i acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_setzero_si512();
  }
  const int8_t* b_ptr = t.B;
  const uint8_t* a_ptr = t.A;
  for (int64_t g = 0; g < t.groups; ++g, b_ptr += 64, a_ptr += 4) {
    __m512i b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) b[j] = _mm512_loadu_si512(b_ptr + j * t.panel_bytes);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i a = broadcast4(a_ptr + r * t.lda);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], a, b[j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    const int64_t left = t.n_valid - 16 * j;
    if (left <= 0) break;
    const __mmask16 mask = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    if (t.acc32 != nullptr) {
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) _mm512_mask_storeu_epi32(t.acc32 + r * t.ldo + 16 * j, mask, acc[r][j]);
      continue;
    }
    const __m512 scale = _mm512_maskz_loadu_ps(mask, t.cs + 16 * j);
    const __m512 offset = _mm512_maskz_loadu_ps(mask, t.co + 16 * j);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][j]), scale, offset);
      if (t.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      _mm512_mask_storeu_ps(t.out + r * t.ldo + 16 * j, mask, v);
    }
  }
}

using TileFn = void (*)(const TileArgs&);

template <int MR>
constexpr TileFn row_entry(int nv) {
  return nv == 1 ? &tile<MR, 1> : nv == 2 ? &tile<MR, 2> : nv == 3 ? &tile<MR, 3> : &tile<MR, 4>;
}

TileFn tile_fn(int mr, int nv) {
  switch (mr) {
    case 1: return row_entry<1>(nv);
    case 2: return row_entry<2>(nv);
    case 3: return row_entry<3>(nv);
    case 4: return row_entry<4>(nv);
    case 5: return row_entry<5>(nv);
    default: return row_entry<6>(nv);
  }
}

}  // namespace

void gemm_rows(const uint8_t* A, int64_t m0, int64_t m1, int64_t lda, const int8_t* packed, int64_t N, int64_t K4,
               const float* col_scale, const float* col_offset, bool relu, float* out, int64_t ldo,
               int32_t* acc32) {
  const int64_t N16 = (N + 15) / 16 * 16;
  const int64_t panel_bytes = K4 * 16;
  for (int64_t c0 = m0; c0 < m1; c0 += kRowChunk) {
    const int64_t c1 = std::min(m1, c0 + kRowChunk);
    for (int64_t n0 = 0; n0 < N16; n0 += 16 * kMaxVecs) {
      const int nv = static_cast<int>(std::min<int64_t>(kMaxVecs, (N16 - n0) / 16));
      TileArgs t;
      t.lda = lda;
      t.B = packed + (n0 / 16) * panel_bytes;
      t.panel_bytes = panel_bytes;
      t.groups = K4 / 4;
      t.cs = col_scale == nullptr ? nullptr : col_scale + n0;
      t.co = col_offset == nullptr ? nullptr : col_offset + n0;
      t.relu = relu;
      t.ldo = ldo;
      t.n_valid = std::min<int64_t>(N - n0, 16 * nv);
      for (int64_t m = c0; m < c1; m += kMaxRows) {
        const int mr = static_cast<int>(std::min<int64_t>(kMaxRows, c1 - m));
        t.A = A + m * lda;
        t.out = out == nullptr ? nullptr : out + m * ldo + n0;
        t.acc32 = acc32 == nullptr ? nullptr : acc32 + m * ldo + n0;
        tile_fn(mr, nv)(t);
      }
    }
  }
}

XTRAIN_VNNI void quantize_rows_u8(const float* src, int64_t M, int64_t K, int64_t lds, float scale, int32_t zero_point,
                                  uint8_t* dst, int64_t ldd) {
  const __m512 vs = _mm512_set1_ps(1.0f / scale);
  const __m512 vz = _mm512_set1_ps(static_cast<float>(zero_point));
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
  for (int64_t m = 0; m < M; ++m) {
    const float* s = src + m * lds;
    uint8_t* d = dst + m * ldd;
    for (int64_t k = 0; k < K; k += 16) {
      const int64_t left = K - k;
      const __mmask16 mask = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
      __m512 q = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, s + k), vs);
      q = _mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);  // half to even
      q = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(q, vz), lo), hi);
      _mm512_mask_cvtusepi32_storeu_epi8(d + k, mask, _mm512_cvtps_epi32(q));
    }
    if (ldd > K) std::memset(d + K, 0, static_cast<size_t>(ldd - K));
  }
}

}  // namespace xtrain::compress::vnni
