// The two GEMM backends behind kernels::gemm_out (gemm.h), for gemm.cpp and the routing
// measurement only. Both take inputs gemm_out has already checked (same rank, CPU, fp32/bf16).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>

#include "xtrain/kernels/gemm.h"

namespace xtrain::kernels::detail {

// oneDNN matmul on the tensors' own strides. Returns false (and computes nothing) when oneDNN has
// no implementation for this combination; that answer is cached too. `impl`, when given, receives
// oneDNN's implementation name ("brg:avx512_core", "gemm:jit", ...).
bool onednn_gemm_out(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args,
                     std::string* impl = nullptr);

// ATen: mm/addmm (OpenBLAS for fp32) or matmul for batches, then the epilogue as tensor ops.
void aten_gemm_out(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args);

// gemm_out with a given backend (kOneDnn falls back to ATen when oneDNN declines).
void gemm_out_with(GemmBackend backend, const at::Tensor& c, const at::Tensor& a, const at::Tensor& b,
                   const GemmArgs& args);

}  // namespace xtrain::kernels::detail
