// The int8 CPU GEMM behind quantised Linear and Conv2d: out[m, n] = acc[m, n]·col_scale[n] +
// col_offset[n] (then ReLU if asked), acc = Σ_k A[m, k]·W[n, k] with A uint8 (activations) and W
// int8 (weights), accumulated exactly in int32. Design choice: AVX-512 VNNI (`vpdpbusd`: 64 u8×s8
// products per instruction) on weights packed once into 16-column panels, activations read in
// place (a row-major [M, K4] byte matrix, K4 = K rounded up to 4); chosen at run time from cpuid,
// with a portable fallback (an fp32 GEMM on the same integers, exact while |acc| < 2^24) that
// logs once why it runs. XTRAIN_INT8=reference|fallback|vnni forces a path (tests, benchmarks).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace xtrain::compress {

// W int8 [N, K] packed for the kernel: panel p (columns 16p..16p+15) holds, for each group of 4 k,
// 16 columns × 4 bytes (zero-padded to N16 = ceil(N/16)·16 columns and K4 rows).
struct PackedInt8Weight {
  at::Tensor packed;    // int8 [N16 / 16, K4 / 4, 16, 4]
  at::Tensor row_sums;  // int32 [N]: Σ_k W[n, k] (for the activation zero point)
  at::Tensor weight;    // int8 [N, K] as given (export, fallback, tests)
  int64_t N = 0, K = 0, K4 = 0;
};
PackedInt8Weight pack_int8_weight(const at::Tensor& w);  // int8 [N, K]

inline int64_t round_up4(int64_t k) { return (k + 3) / 4 * 4; }

enum class Int8Path { kVnni, kFallback, kReference };
Int8Path int8_path();             // what the next call runs
std::string int8_path_reason();   // one line: which path and why
bool cpu_has_avx512_vnni();

// A: uint8 rows of `lda` >= K4 bytes (bytes K..K4-1 of a row may hold anything: W is 0 there).
// out: float32 rows of `ldo` >= N. col_scale, col_offset: float32 [N].
void int8_gemm(const uint8_t* A, int64_t M, int64_t lda, const PackedInt8Weight& W, const float* col_scale,
               const float* col_offset, bool relu, float* out, int64_t ldo);
// The raw int32 accumulators through the same path (tests): out [M, N] int32.
at::Tensor int8_gemm_accumulators(const at::Tensor& A /*uint8 [M, K4]*/, const PackedInt8Weight& W);

// uint8 activations: dst[m, k] = clamp(round_half_even(src[m, k]·(1/scale)) + zp, 0, 255), k < K;
// 0 for K <= k < ldd. src rows of `lds` floats.
void quantize_rows_u8(const float* src, int64_t M, int64_t K, int64_t lds, float scale, int64_t zero_point,
                      uint8_t* dst, int64_t ldd);

}  // namespace xtrain::compress
