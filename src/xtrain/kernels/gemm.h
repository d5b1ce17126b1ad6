// The routed GEMM: C = alpha·(A·B) + bias + add + beta·C on plain strided CPU memory, 2-D or
// batched, fp32 or bf16 inputs, fp32 or input-dtype output. Two backends: oneDNN's matmul
// (primitives cached by shapes, strides, dtypes and attributes) and ATen's mm/bmm (OpenBLAS for
// fp32). Design choice: the backend is picked per dtype (bf16 by table, fp32 by a one-time
// measurement), so the machine's BLAS selection (OpenBLAS's Prescott kernel here, see
// reference/platform.md) is routed around, never changed. oneDNN stays out of this header.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <string>

namespace xtrain::kernels {

enum class GemmBackend { kAuto, kOneDnn, kAten };

struct GemmArgs {
  double alpha = 1.0;  // scales A·B only
  double beta = 0.0;   // 0: C's old contents are ignored (NaN included); 1: accumulate into C
  at::Tensor bias;     // [N], added to every row (fp32 or A's dtype); not together with alpha != 1
  at::Tensor add;      // broadcast to C and added after alpha (e.g. an additive causal mask [T, T])
};

// Shapes: A [..., M, K], B [..., K, N], C [..., M, N] with the same number of dims (2 to 6); each
// leading (batch) dim of A or B equals C's or is 1 (broadcast). Any strides, as long as every
// matrix has unit stride in one of its last two dims (row-major, or transposed as `w.t()`); C may
// be a strided view into a bigger buffer (e.g. one of q, k, v inside a fused [B, T, 3C] tensor).
// A and B share a dtype (fp32 or bf16); C is fp32 or A's dtype. CPU tensors; no autograd.
void gemm_out(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args = {});
// The same into a new row-major C of `out_dtype` (default: A's dtype).
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b, const GemmArgs& args = {},
                c10::optional<c10::ScalarType> out_dtype = c10::nullopt);

// Whether gemm_out accepts these inputs (CPU, fp32/bf16, same dtype): callers fall back to ATen.
bool gemm_supports(const at::Tensor& a, const at::Tensor& b);

// The backend gemm_out uses for a problem of this dtype and size (kAuto resolved): a forced
// backend if any, else the routing table (per dtype; fp32 measured on its first use).
GemmBackend gemm_backend_for(c10::ScalarType dtype, int64_t batch, int64_t M, int64_t N, int64_t K);
// Forces a backend for every later call (tests, benchmarks); kAuto restores routing. The
// environment variable XTRAIN_GEMM=onednn|aten|auto sets the initial value.
void set_gemm_backend(GemmBackend backend);
GemmBackend forced_gemm_backend();
// The routing table, one line per dtype ("gemm fp32: onednn 150 GFLOP/s [brg:avx512_core], aten
// 25 (256^3, 1 thread) -> onednn"); measure_now runs the fp32 measurement if it has not run yet.
std::string gemm_routing_report(bool measure_now = true);

}  // namespace xtrain::kernels
