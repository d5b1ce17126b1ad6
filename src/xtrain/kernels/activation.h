// Element-wise kernels of the GPT's hot path.
//
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

// Inverted dropout whose mask is a pure function of (seed, element index): a counter-based hash
// (splitmix64, as the attention kernels' dropout), so backward regenerates the mask instead of
// storing it and the result does not depend on the thread count. The seed is drawn from ATen's
// default CPU generator, so at::manual_seed and activation checkpointing's RNG restore replay it.
// ATen 1.13's CPU dropout draws a Bernoulli per element from one generator (~10 ns an element
// here). Identity when p == 0 or !train; p in [0, 1). Differentiable; fp32 and bf16 on the CPU
// (other dtypes and devices take at::dropout).
at::Tensor dropout(const at::Tensor& x, double p, bool train);

// The raw kernel, for tests: x·mask/(1−p) with the mask of (seed, index).
at::Tensor dropout_with_seed(const at::Tensor& x, double p, uint64_t seed);

}  // namespace xtrain::kernels
