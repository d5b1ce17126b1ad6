// A pre-LayerNorm transformer block (GPT-2): x + attn(ln1(x)), then x + mlp(ln2(x)). The unit a
// later ZeRO-3 or activation checkpointing wraps (GPT keeps blocks in a ModuleList). The attention
// is whatever xtrain.model.attention asks for (nn::make_attention): CausalSelfAttention by default,
// MultiScaleAttention for "multiscale"; both have the parameters attn.qkv and attn.proj.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include "xtrain/nn/causal_self_attention.h"  // the default attention; users of Block name it
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/mlp.h"
#include "xtrain/nn/options.h"

namespace xtrain::nn {

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t C, int64_t NH, int64_t max_T, double dropout,
            const AttentionOptions& attention = AttentionOptions());
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C]

  LayerNorm ln1{nullptr};
  torch::nn::AnyModule attn;  // [B, T, C] -> [B, T, C]; attn.ptr() is the registered child "attn"
  LayerNorm ln2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

}  // namespace xtrain::nn
