// ParallelSelfAttention: the local fused [B, T, 3C/tp] is [q_r; k_r; v_r] (stride-3 column split),
// so it splits into local heads exactly as nn::CausalSelfAttention's reference path splits the full
// one; the output [B, T, C/tp] holds the local heads' channels in order, proj's input slice.
#include "xtrain/parallel/tensor/parallel_self_attention.h"

#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/full.h>
#include <ATen/ops/softmax.h>

#include <cmath>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::parallel::tensor {

ParallelSelfAttentionImpl::ParallelSelfAttentionImpl(int64_t C, int64_t NH, int64_t max_T, CommPtr tp,
                                                     double dropout)
    : C_(C), max_T_(max_T) {
  const int64_t size = tp ? tp->size() : 1;
  XTRAIN_USAGE_CHECK(NH > 0 && C % NH == 0, "parallel: xtrain.model.heads (", NH, ") must divide d_model (", C, ")");
  XTRAIN_USAGE_CHECK(NH % size == 0, "parallel: tensor_parallel.size (", size, ") must divide xtrain.model.heads (",
                     NH, ")");
  XTRAIN_USAGE_CHECK(dropout == 0.0, "parallel: not supported yet: xtrain.model.dropout=", dropout,
                     " with tensor_parallel.size > 1 (attention dropout needs a per-rank generator)");
  local_heads_ = NH / size;
  HS_ = C / NH;
  qkv = register_module("qkv", ColumnParallelLinear(C, 3 * C, tp, true, false, /*stride=*/3));
  proj = register_module("proj", RowParallelLinear(C, C, tp, true, /*input_is_parallel=*/true));
}

at::Tensor ParallelSelfAttentionImpl::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == C_, "parallel: attention input must be [B, T, ", C_, "], got ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1), NH = local_heads_, c = NH * HS_;
  TORCH_CHECK(T <= max_T_, "parallel: attention got T=", T, " > seq_len ", max_T_);
  const at::Tensor fused = qkv->forward(x);  // [B, T, 3c]
  const auto h = fused.view({B, T, 3, NH, HS_}).permute({2, 0, 3, 1, 4}).contiguous();
  const auto q = h.select(0, 0).view({B * NH, T, HS_});
  const auto k = h.select(0, 1).view({B * NH, T, HS_});
  const auto v = h.select(0, 2).view({B * NH, T, HS_});
  const auto mask = at::full({T, T}, -std::numeric_limits<double>::infinity(), fused.options()).triu_(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS_));
  const auto att = at::softmax(at::baddbmm(mask, q, k.transpose(1, 2), /*beta=*/1.0, /*alpha=*/scale), -1);
  const auto y = at::bmm(att, v).view({B, NH, T, HS_}).transpose(1, 2).reshape({B, T, c});
  return proj->forward(y);
}

}  // namespace xtrain::parallel::tensor
