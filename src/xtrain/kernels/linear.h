// The one GEMM entry point for every Linear in nn/: y = x · weightᵀ + bias, x [..., in], weight
// [out, in], bias [out] or undefined. On CPU fp32/bf16 it is a custom autograd function whose
// forward and backward (dX = dY·W, dW = dYᵀ·X, db = ΣdY) all run the routed GEMM of gemm.h, the
// bias fused into the forward GEMM; anything else (CUDA, double) is at::linear. Under CPU autocast
// it computes in the autocast dtype, as at::linear would.
#pragma once
#include <ATen/core/Tensor.h>

namespace xtrain::kernels {

// `bias` may be undefined (no bias). Autograd flows through as for torch.nn.functional.linear.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace xtrain::kernels
