// CausalSelfAttention: qkv GEMM, one copy into [3, B·NH, T, HS], baddbmm(mask, q, kᵀ, α=1/√HS),
// softmax, dropout, bmm with v, one copy back to [B, T, C], proj GEMM. Reference:
// nanoGPT's CausalSelfAttention (its non-flash path), checked by tests/models/gpt_test.cpp.
#include "xtrain/nn/causal_self_attention.h"

#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/full.h>
#include <ATen/ops/softmax.h>

#include <cmath>
#include <limits>

#include "xtrain/base/error.h"

namespace xtrain::nn {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t C, int64_t NH, int64_t max_T, double dropout)
    : C_(C), NH_(NH), HS_(0), max_T_(max_T), dropout_(dropout) {
  XTRAIN_USAGE_CHECK(NH > 0 && C > 0 && C % NH == 0, "nn: xtrain.model.heads (", NH,
                     ") must be > 0 and divide xtrain.model.d_model (", C, ")");
  XTRAIN_USAGE_CHECK(max_T > 0, "nn: xtrain.model.seq_len must be > 0, got ", max_T);
  XTRAIN_USAGE_CHECK(dropout >= 0 && dropout < 1, "nn: xtrain.model.dropout must be in [0, 1), got ", dropout);
  HS_ = C / NH;
  qkv = register_module("qkv", Linear(C, 3 * C));
  proj = register_module("proj", Linear(C, C));
}

at::Tensor CausalSelfAttentionImpl::causal_bias(int64_t T, const at::Tensor& like) {
  if (!mask_.defined() || mask_.scalar_type() != like.scalar_type() || mask_.device() != like.device()) {
    mask_ = at::full({max_T_, max_T_}, -std::numeric_limits<double>::infinity(), like.options()).triu_(1);
  }
  return mask_.narrow(0, 0, T).narrow(1, 0, T);  // broadcast over B·NH by baddbmm
}

at::Tensor CausalSelfAttentionImpl::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == C_, "nn: attention input must be [B, T, ", C_, "], got ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1);
  TORCH_CHECK(T <= max_T_, "nn: attention got T=", T, " > seq_len ", max_T_);
  const bool drop = dropout_ > 0 && is_training();
  // [B, T, 3C] -> [3, B, NH, T, HS]: the one copy that makes q, k, v contiguous [B·NH, T, HS] views.
  const auto heads = qkv->forward(x).view({B, T, 3, NH_, HS_}).permute({2, 0, 3, 1, 4}).contiguous();
  const auto q = heads.select(0, 0).view({B * NH_, T, HS_});
  const auto k = heads.select(0, 1).view({B * NH_, T, HS_});
  const auto v = heads.select(0, 2).view({B * NH_, T, HS_});
  // scores [B·NH, T, T] = mask + (q·kᵀ)/√HS in one GEMM.
  auto att = at::baddbmm(causal_bias(T, x), q, k.transpose(1, 2), /*beta=*/1.0,
                         /*alpha=*/1.0 / std::sqrt(static_cast<double>(HS_)));
  att = at::softmax(att, -1);
  if (drop) att = at::dropout(att, dropout_, /*train=*/true);
  // [B·NH, T, HS] -> [B, T, NH, HS] -> [B, T, C]: the copy back to token-major rows for proj.
  auto y = at::bmm(att, v).view({B, NH_, T, HS_}).transpose(1, 2).reshape({B, T, C_});
  y = proj->forward(y);
  if (drop) y = at::dropout(y, dropout_, /*train=*/true);
  return y;
}

}  // namespace xtrain::nn
