// Vision Transformer (`xtrain.model.type: vit`; Dosovitskiy et al. 2021, timm's layout): patches
// of P×P pixels flattened channel-major (c, y, x) and embedded by one linear layer (a conv with
// stride P, as a GEMM), an optional class token, learned position embeddings, pre-LN blocks whose
// attention is nn::GridAttention over the patch grid (dense or 2-D multi-scale), a final LayerNorm,
// a pool (the class token, or the mean over the patches) and a linear head. Design choice: the
// image size and the patch are fixed at build (the position embeddings and the multi-scale grid
// depend on them); ViT-only settings live in xtrain.model.args (VitArgs). MLP: fc (C -> rC), GELU
// (tanh approximation, as the GPT's), proj. Reference: tests/reference/gen_vit.py.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <string>

#include "xtrain/models/options.h"
#include "xtrain/models/registry.h"
#include "xtrain/nn/grid_attention.h"
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/linear.h"

namespace xtrain::models {

// xtrain.model.args of vit.
struct VitArgs {
  int64_t patch = 4;          // P: patch side in pixels; divides the image's height and width
  int64_t mlp_ratio = 4;      // hidden width of the MLP over d_model
  std::string pool = "cls";   // cls (a class token, token 0) | mean (over the patches, no class token)
  int64_t channels = 1;       // input channels (the image datasets: 1)
  int64_t image_h = 0, image_w = 0;  // args.image_size: N or [H, W]; 0: square, from in_features / channels
};
// Reads and checks xtrain.model.args (and derives the image size from in_features when unset):
// UsageError naming the key for an unknown key or a bad value.
VitArgs vit_args(const ModelOptions& options);

class VitMlpImpl : public torch::nn::Module {
 public:
  VitMlpImpl(int64_t C, int64_t hidden, double dropout);
  at::Tensor forward(const at::Tensor& x);  // [..., C] -> [..., C]
  nn::Linear fc{nullptr}, proj{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(VitMlp);

class VitBlockImpl : public torch::nn::Module {
 public:
  VitBlockImpl(const nn::GridAttentionOptions& attention, int64_t mlp_hidden);
  at::Tensor forward(const at::Tensor& x);  // x + attn(ln1(x)), then + mlp(ln2(·))
  nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  nn::GridAttention attn{nullptr};
  VitMlp mlp{nullptr};
};
TORCH_MODULE(VitBlock);

class VitImpl : public torch::nn::Module {
 public:
  // Sizes from options (layers, d_model, heads, dropout, attention, num_classes > 0, args).
  // Deterministic given torch::manual_seed.
  explicit VitImpl(const ModelOptions& options);
  // float [B, channels, H, W] -> logits [B, num_classes].
  at::Tensor forward(const at::Tensor& x);

  const VitArgs& args() const { return args_; }
  int64_t grid_h() const { return args_.image_h / args_.patch; }
  int64_t grid_w() const { return args_.image_w / args_.patch; }

  nn::Linear patch_embed{nullptr};  // [C, channels·P·P]
  at::Tensor cls_token;             // [1, 1, C] (pool cls only)
  at::Tensor pos_embed;             // [1, tokens, C]
  torch::nn::ModuleList blocks{nullptr};
  nn::LayerNorm ln_f{nullptr};
  nn::Linear head{nullptr};  // [num_classes, C]

 private:
  ModelOptions options_;
  VitArgs args_;
};
TORCH_MODULE(Vit);

ModelEntry vit_entry();  // registered as "vit" (registry.cpp)

// [B, ch, gh·P, gw·P] -> [B, gh·gw, ch·P·P]: patches row-major, each flattened (c, y, x). The
// model's forward and the compress graph's Patchify op both cut images this way.
at::Tensor patchify(const at::Tensor& images, int64_t gh, int64_t gw, int64_t patch);

}  // namespace xtrain::models
