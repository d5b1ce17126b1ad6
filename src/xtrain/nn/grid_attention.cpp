// GridAttention (see grid_attention.h): qkv GEMM, q/k/v as strided views of its output, one
// run_attention_2d call, proj GEMM. Reference: tests/models/vit_test.cpp (PyTorch's dense ViT
// attention via gen_vit.py; multi-scale with whole-grid windows equals dense).
#include "xtrain/nn/grid_attention.h"

#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::nn {

GridAttentionImpl::GridAttentionImpl(GridAttentionOptions options) : o_(std::move(options)) {
  XTRAIN_USAGE_CHECK(o_.num_heads > 0 && o_.embed_dim > 0 && o_.embed_dim % o_.num_heads == 0,
                     "nn: xtrain.model.heads (", o_.num_heads, ") must be > 0 and divide xtrain.model.d_model (",
                     o_.embed_dim, ")");
  if (!o_.windows.empty()) kernels::ms_attention::check_windows(o_.num_heads, o_.windows);
  XTRAIN_USAGE_CHECK(o_.dropout >= 0 && o_.dropout < 1, "nn: xtrain.model.dropout must be in [0, 1), got ",
                     o_.dropout);
  XTRAIN_USAGE_CHECK(o_.grid_h > 0 && o_.grid_w > 0, "nn: the patch grid must be at least 1x1, got ", o_.grid_h, "x",
                     o_.grid_w);
  XTRAIN_USAGE_CHECK(!o_.kernel.empty(), "nn: xtrain.model.attention.kernel must be a kernel name or \"auto\", got \"\"");
  HS_ = o_.embed_dim / o_.num_heads;
  qkv = register_module("qkv", Linear(o_.embed_dim, 3 * o_.embed_dim));
  proj = register_module("proj", Linear(o_.embed_dim, o_.embed_dim));
}

at::Tensor GridAttentionImpl::forward(const at::Tensor& x) {
  const int64_t C = o_.embed_dim, NH = o_.num_heads;
  XTRAIN_USAGE_CHECK(x.dim() == 3 && x.size(1) == tokens() && x.size(2) == C, "nn: grid attention input must be [B, ",
                     tokens(), ", ", C, "] (a ", o_.grid_h, "x", o_.grid_w, " grid", o_.cls_token ? " + class token" : "",
                     "), got ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1);
  const bool drop = o_.dropout > 0 && is_training();
  // [B, T, 3C] -> [3, B, NH, T, HS] as a view: q, k, v are strided [B, NH, T, HS] views.
  const auto heads = qkv->forward(x).view({B, T, 3, NH, HS_}).permute({2, 0, 3, 1, 4});
  auto y = kernels::attention::run_attention_2d(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2), o_.windows,
                                                o_.grid_h, o_.grid_w, o_.cls_token, drop ? o_.dropout : 0.0,
                                                o_.kernel);
  y = proj->forward(y.transpose(1, 2).reshape({B, T, C}));
  return kernels::dropout(y, o_.dropout, drop);
}

}  // namespace xtrain::nn
