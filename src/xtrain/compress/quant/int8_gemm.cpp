// int8_gemm: weight packing, the run-time path choice (cpuid + XTRAIN_INT8), the row-parallel
// driver over the VNNI kernels, the fp32 fallback and the naive reference.
#include "xtrain/compress/quant/int8_gemm.h"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/compress/quant/int8_gemm_vnni.h"

namespace xtrain::compress {

bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return has;
}

namespace {

struct PathChoice {
  Int8Path path;
  std::string reason;
};

PathChoice decide_path() {
  const char* env = std::getenv("XTRAIN_INT8");
  const std::string forced = env ? env : "";
  XTRAIN_USAGE_CHECK(forced.empty() || forced == "vnni" || forced == "fallback" || forced == "reference",
                     "compress: XTRAIN_INT8 must be vnni, fallback or reference, got \"", forced, "\"");
  if (forced == "reference") return {Int8Path::kReference, "int8: naive integer reference (XTRAIN_INT8=reference)"};
  if (forced == "fallback") {
    return {Int8Path::kFallback, "int8: fp32 GEMM on the integer values (XTRAIN_INT8=fallback)"};
  }
  if (cpu_has_avx512_vnni()) return {Int8Path::kVnni, "int8: AVX-512 VNNI (vpdpbusd) kernels"};
  XTRAIN_USAGE_CHECK(forced.empty(), "compress: XTRAIN_INT8=vnni but this CPU has no AVX-512 VNNI");
  return {Int8Path::kFallback,
          "int8: this CPU has no AVX-512 VNNI (cpuid: avx512vnni/avx512bw missing), so int8 layers run an fp32 GEMM "
          "on the integer values: same results, smaller model, no int8 speed-up"};
}

const PathChoice& path_choice() {
  static const PathChoice choice = decide_path();
  static std::once_flag logged;
  std::call_once(logged, [] {
    if (choice.path == Int8Path::kFallback) log::warn(choice.reason);
  });
  return choice;
}

void fallback_gemm(const uint8_t* A, int64_t M, int64_t lda, const PackedInt8Weight& W, const float* cs,
                   const float* co, bool relu, float* out, int64_t ldo, int32_t* acc32) {
  const auto a = at::from_blob(const_cast<uint8_t*>(A), {M, W.K}, {lda, 1}, at::kByte).to(at::kFloat);
  const auto acc = at::mm(a, W.weight.to(at::kFloat).t());  // exact integers while |acc| < 2^24
  const float* p = acc.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < W.N; ++n) {
      const float v = p[m * W.N + n];
      if (acc32 != nullptr) {
        acc32[m * ldo + n] = static_cast<int32_t>(std::lrint(v));
        continue;
      }
      const float y = v * cs[n] + co[n];
      out[m * ldo + n] = relu && y < 0 ? 0.0f : y;
    }
  }
}

void reference_gemm(const uint8_t* A, int64_t M, int64_t lda, const PackedInt8Weight& W, const float* cs,
                    const float* co, bool relu, float* out, int64_t ldo, int32_t* acc32) {
  const int8_t* w = W.weight.data_ptr<int8_t>();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < W.N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < W.K; ++k) acc += static_cast<int64_t>(A[m * lda + k]) * w[n * W.K + k];
      if (acc32 != nullptr) {
        acc32[m * ldo + n] = static_cast<int32_t>(acc);
        continue;
      }
      const float y = static_cast<float>(acc) * cs[n] + co[n];
      out[m * ldo + n] = relu && y < 0 ? 0.0f : y;
    }
  }
}

void run_gemm(const uint8_t* A, int64_t M, int64_t lda, const PackedInt8Weight& W, const float* cs, const float* co,
              bool relu, float* out, int64_t ldo, int32_t* acc32) {
  TORCH_CHECK(lda >= W.K4, "compress: int8 GEMM rows need ", W.K4, " bytes, got lda ", lda);
  switch (int8_path()) {
    case Int8Path::kReference: return reference_gemm(A, M, lda, W, cs, co, relu, out, ldo, acc32);
    case Int8Path::kFallback: return fallback_gemm(A, M, lda, W, cs, co, relu, out, ldo, acc32);
    case Int8Path::kVnni: break;
  }
  const int8_t* packed = W.packed.data_ptr<int8_t>();
  // Rows in multiples of 6 per task (the tile height), enough work per task to amortise it.
  const int64_t grain = std::max<int64_t>(6, ((int64_t{1} << 20) / std::max<int64_t>(1, W.N * W.K4)) / 6 * 6);
  at::parallel_for(0, M, grain, [&](int64_t m0, int64_t m1) {
    vnni::gemm_rows(A, m0, m1, lda, packed, W.N, W.K4, cs, co, relu, out, ldo, acc32);
  });
}

}  // namespace

Int8Path int8_path() { return path_choice().path; }
std::string int8_path_reason() { return path_choice().reason; }

PackedInt8Weight pack_int8_weight(const at::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kChar, "compress: pack_int8_weight needs int8 [N, K], got ",
              w.scalar_type(), w.sizes());
  PackedInt8Weight p;
  p.N = w.size(0), p.K = w.size(1), p.K4 = round_up4(p.K);
  p.weight = w.contiguous();
  p.row_sums = p.weight.to(at::kInt).sum(1, /*keepdim=*/false, at::kInt);
  const int64_t N16 = (p.N + 15) / 16 * 16;
  auto padded = at::zeros({N16, p.K4}, at::kChar);
  padded.narrow(0, 0, p.N).narrow(1, 0, p.K).copy_(p.weight);
  // [N16, K4] -> [N16/16, 16, K4/4, 4] -> [N16/16, K4/4, 16, 4]
  p.packed = padded.view({N16 / 16, 16, p.K4 / 4, 4}).permute({0, 2, 1, 3}).contiguous();
  return p;
}

void int8_gemm(const uint8_t* A, int64_t M, int64_t lda, const PackedInt8Weight& W, const float* col_scale,
               const float* col_offset, bool relu, float* out, int64_t ldo) {
  if (M == 0) return;
  run_gemm(A, M, lda, W, col_scale, col_offset, relu, out, ldo, nullptr);
}

at::Tensor int8_gemm_accumulators(const at::Tensor& A, const PackedInt8Weight& W) {
  TORCH_CHECK(A.dim() == 2 && A.scalar_type() == at::kByte && A.size(1) >= W.K4, "compress: A must be uint8 [M, >=",
              W.K4, "], got ", A.scalar_type(), A.sizes());
  const auto a = A.contiguous();
  auto out = at::empty({A.size(0), W.N}, at::kInt);
  if (A.size(0) > 0) {
    run_gemm(a.data_ptr<uint8_t>(), a.size(0), a.size(1), W, nullptr, nullptr, false, nullptr, W.N,
             out.data_ptr<int32_t>());
  }
  return out;
}

void quantize_rows_u8(const float* src, int64_t M, int64_t K, int64_t lds, float scale, int64_t zero_point,
                      uint8_t* dst, int64_t ldd) {
  if (cpu_has_avx512_vnni()) {
    at::parallel_for(0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, K)), [&](int64_t m0, int64_t m1) {
      vnni::quantize_rows_u8(src + m0 * lds, m1 - m0, K, lds, scale, static_cast<int32_t>(zero_point),
                             dst + m0 * ldd, ldd);
    });
    return;
  }
  const float inv = 1.0f / scale;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) {
      const float q = std::nearbyint(src[m * lds + k] * inv) + static_cast<float>(zero_point);
      dst[m * ldd + k] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, q)));
    }
    if (ldd > K) std::memset(dst + m * ldd + K, 0, static_cast<size_t>(ldd - K));
  }
}

}  // namespace xtrain::compress
