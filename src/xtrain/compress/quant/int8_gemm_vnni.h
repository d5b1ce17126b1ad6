// The AVX-512 VNNI kernels behind int8_gemm.h (compiled with per-function target attributes, so
// the rest of the build keeps its flags; call only when cpu_has_avx512_vnni()).
#pragma once
#include <cstdint>

namespace xtrain::compress::vnni {

// Rows [m0, m1) of the GEMM; `packed` as PackedInt8Weight::packed; epilogue as int8_gemm. When
// acc32 is non-null the raw accumulators go there (row stride ldo) instead of the epilogue.
void gemm_rows(const uint8_t* A, int64_t m0, int64_t m1, int64_t lda, const int8_t* packed, int64_t N, int64_t K4,
               const float* col_scale, const float* col_offset, bool relu, float* out, int64_t ldo,
               int32_t* acc32);

void quantize_rows_u8(const float* src, int64_t M, int64_t K, int64_t lds, float scale, int32_t zero_point,
                      uint8_t* dst, int64_t ldd);

}  // namespace xtrain::compress::vnni
