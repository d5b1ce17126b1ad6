// Causal multi-head self-attention as GPT-2: one fused QKV projection `qkv` (C -> 3C), scores
// q·kᵀ/√HS with a causal mask, softmax, attention dropout, ·v, output projection `proj`, residual
// dropout. Design choice: a few large ops on the fused qkv output — q, k, v are strided views of it,
// the scale and the mask ride in the score GEMM, and y is written token-major for proj (the mask is
// a cached additive [T_max, T_max] tensor, built once per dtype/device, never per call).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/nn/linear.h"

namespace xtrain::nn {

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  // NH must divide C (UsageError naming xtrain.model.heads / d_model); max_T bounds T.
  CausalSelfAttentionImpl(int64_t C, int64_t NH, int64_t max_T, double dropout);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C]

  Linear qkv{nullptr};   // [3C, C]: rows are q | k | v, each head-major (NH, HS)
  Linear proj{nullptr};  // [C, C]: a residual projection (GPT-2 scales its init)

 private:
  at::Tensor causal_bias(int64_t T, const at::TensorOptions& options);
  // baddbmm / softmax / dropout / bmm on copied heads: the path with dropout, and the reference.
  at::Tensor reference_core(const at::Tensor& fused, int64_t T, bool drop, double scale);

  int64_t C_, NH_, HS_, max_T_;
  double dropout_;
  // [max_T, max_T]: 0 on and below the diagonal, -inf above. Built lazily on first use (so one
  // instance must not run forward on two threads at once before that).
  at::Tensor mask_;
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace xtrain::nn
