// kernels::matmul: C [..., M, N] = A [..., M, K] · B [..., K, N] for two activations (attention's
// q·kᵀ and p·v as a Python module writes them inline), with autograd through the routed GEMM of
// gemm.h: dA = dC·Bᵀ and dB = Aᵀ·dC, the transposes taken through strides. CPU fp32/bf16, 3-D to
// 6-D, equal leading (batch) dims; anything else (broadcasting, 2-D, other dtypes or devices, CPU
// autocast) is at::matmul. A Linear's GEMM with a weight is kernels::linear (linear.h).
#pragma once
#include <ATen/core/Tensor.h>

namespace xtrain::kernels {

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b);

// Whether matmul(a, b) runs the routed GEMM (otherwise it is at::matmul).
bool matmul_routed(const at::Tensor& a, const at::Tensor& b);

}  // namespace xtrain::kernels
