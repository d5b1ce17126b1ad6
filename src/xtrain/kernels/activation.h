// GELU with the tanh approximation (GPT-2's), fused: one pass over memory forward and one backward,
// in fp32 registers for fp32 and bf16 tensors. ATen 1.13's kernels take 2 ns (fp32) and 5 ns (bf16)
// an element here; these stream at memory speed (bench_gpt_train --profile shows both).
//   y = x · σ(2u),  u = √(2/π)·(x + 0.044715·x³)      (0.5·(1 + tanh u) = σ(2u))
// Other dtypes, and CPUs without AVX-512, take at::gelu / at::gelu_backward.
#pragma once
#include <ATen/core/Tensor.h>

namespace xtrain::kernels {

// Differentiable (a custom autograd function saving x).
at::Tensor gelu_tanh(const at::Tensor& x);

// The raw kernels, for tests: same dtype and shape as x.
at::Tensor gelu_tanh_forward(const at::Tensor& x);
at::Tensor gelu_tanh_backward(const at::Tensor& grad, const at::Tensor& x);

}  // namespace xtrain::kernels
