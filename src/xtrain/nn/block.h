// A pre-LayerNorm transformer block (GPT-2): x + attn(ln1(x)), then x + mlp(ln2(x)). The unit a
// later ZeRO-3 or activation checkpointing wraps (GPT keeps blocks in a ModuleList).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/nn/causal_self_attention.h"
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/mlp.h"

namespace xtrain::nn {

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t C, int64_t NH, int64_t max_T, double dropout);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C]

  LayerNorm ln1{nullptr};
  CausalSelfAttention attn{nullptr};
  LayerNorm ln2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

}  // namespace xtrain::nn
