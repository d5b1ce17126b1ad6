// MultiScaleAttention: multi-head self-attention where each head sees the exact multi-scale
// partition of the sequence (shared/design/multiscale-attention.md) instead of every position:
// O(T·w·log(T/w)) time instead of O(T²). Same parameters, names and init as CausalSelfAttention
// (`qkv` C -> 3C, `proj` C -> C, both with bias), so a model switches between the two and loads the
// same weights. Design choice: the attention itself is one call into the kernel registry
// (kernels/attention/registry.h), so the kernel ("auto" or a name) is a constructor argument; with
// `windows` empty every head sees every (causally allowed) position: dense attention.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>
#include <vector>

#include "xtrain/nn/linear.h"

namespace xtrain::nn {

class MultiScaleAttentionImpl : public torch::nn::Module {
 public:
  // embed_dim (C) must be a multiple of num_heads (NH), NH >= windows.size() (heads split as evenly
  // as possible, kernels/ms_attention/windows.h); windows >= 1;
  // dropout in [0, 1) (on the attention weights and on the output, training only, as GPT-2).
  // UsageError naming the argument and its value otherwise.
  MultiScaleAttentionImpl(int64_t embed_dim, int64_t num_heads, std::vector<int64_t> windows = {8, 16, 32},
                          bool causal = true, double dropout = 0.0, std::string kernel = "auto");
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C]

  const std::vector<int64_t>& windows() const { return windows_; }
  // The registered kernel "auto" (or the configured name) picks for an input like x.
  std::string kernel_for(const at::Tensor& x) const;

  Linear qkv{nullptr};   // [3C, C]: rows are q | k | v, each head-major (NH, HS)
  Linear proj{nullptr};  // [C, C]

 private:
  int64_t C_, NH_, HS_;
  std::vector<int64_t> windows_;
  bool causal_;
  double dropout_;
  std::string kernel_;
};

// TORCH_MODULE's holder, plus a constructor that accepts a braced window list ({8, 16, 32}).
class MultiScaleAttention : public torch::nn::ModuleHolder<MultiScaleAttentionImpl> {
 public:
  using torch::nn::ModuleHolder<MultiScaleAttentionImpl>::ModuleHolder;
  MultiScaleAttention(int64_t embed_dim, int64_t num_heads, std::vector<int64_t> windows = {8, 16, 32},
                      bool causal = true, double dropout = 0.0, std::string kernel = "auto")
      : ModuleHolder(std::make_shared<MultiScaleAttentionImpl>(embed_dim, num_heads, std::move(windows), causal,
                                                                dropout, std::move(kernel))) {}
};

}  // namespace xtrain::nn
