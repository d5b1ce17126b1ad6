// The one GEMM entry point for every Linear in nn/: y = x · weightᵀ + bias, x [..., in], weight
// [out, in], bias [out] or undefined. Today it is at::linear (addmm for 2-D input, one flattened
// GEMM for contiguous 3-D input); a later issue routes the GEMM here (oneDNN vs OpenBLAS, see
// reference/platform.md) without touching the layers.
#pragma once
#include <ATen/core/Tensor.h>

namespace xtrain::kernels {

// `bias` may be undefined (no bias). Autograd flows through as for torch.nn.functional.linear.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace xtrain::kernels
