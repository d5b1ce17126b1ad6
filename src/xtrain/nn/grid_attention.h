// GridAttention: bidirectional multi-head self-attention over an image's patch grid (the Vision
// Transformer's), dense or 2-D multi-scale (docs/design/multiscale-attention-2d.md). Same
// parameters and names as MultiScaleAttention (`qkv` C -> 3C, `proj` C -> C, both with bias).
// Design choice: the grid (g_h, g_w) and whether token 0 is a class token are properties of the
// layer, not inferred from T; the attention itself is one call to the kernel registry's
// run_attention_2d, so the kernel ("auto" or a name) is a constructor argument.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

#include "xtrain/nn/linear.h"

namespace xtrain::nn {

struct GridAttentionOptions {
  int64_t embed_dim = 0;          // C, a multiple of num_heads
  int64_t num_heads = 1;          // NH >= windows.size()
  int64_t grid_h = 1, grid_w = 1; // patches per column and per row
  bool cls_token = false;         // token 0 is a class token (T = grid_h·grid_w + 1)
  std::vector<int64_t> windows;   // empty: dense; else square window sides (patches), one per head group
  double dropout = 0.0;           // attention weights and output, training only
  std::string kernel = "auto";    // xtrain.model.attention.kernel
};

class GridAttentionImpl : public torch::nn::Module {
 public:
  // UsageError naming the key for sizes that do not fit (heads, d_model, windows, dropout, grid).
  explicit GridAttentionImpl(GridAttentionOptions options);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C], T = grid_h·grid_w (+1)

  const GridAttentionOptions& options() const { return o_; }
  int64_t tokens() const { return o_.grid_h * o_.grid_w + (o_.cls_token ? 1 : 0); }

  Linear qkv{nullptr};   // [3C, C]: rows are q | k | v, each head-major (NH, HS)
  Linear proj{nullptr};  // [C, C]

 private:
  GridAttentionOptions o_;
  int64_t HS_ = 0;
};
TORCH_MODULE(GridAttention);

}  // namespace xtrain::nn
