// MultiScaleAttention (see multiscale_attention.h): qkv GEMM, q/k/v as strided views of its output
// (no copy: the kernels read any strides), one registry call, proj GEMM. Reference: the dense
// masked spec in kernels/ms_attention/reference.h, through tests/nn/multiscale_attention_test.cpp.
#include "xtrain/nn/multiscale_attention.h"


#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::nn {

MultiScaleAttentionImpl::MultiScaleAttentionImpl(int64_t embed_dim, int64_t num_heads, std::vector<int64_t> windows,
                                                 bool causal, double dropout, std::string kernel)
    : C_(embed_dim), NH_(num_heads), HS_(0), windows_(std::move(windows)), causal_(causal), dropout_(dropout),
      kernel_(std::move(kernel)) {
  XTRAIN_USAGE_CHECK(num_heads > 0 && embed_dim > 0 && embed_dim % num_heads == 0, "nn: xtrain.model.heads (",
                     num_heads, ") must be > 0 and divide xtrain.model.d_model (", embed_dim, ")");
  if (!windows_.empty()) kernels::ms_attention::check_windows(num_heads, windows_);
  XTRAIN_USAGE_CHECK(dropout >= 0 && dropout < 1, "nn: xtrain.model.dropout must be in [0, 1), got ", dropout);
  XTRAIN_USAGE_CHECK(!kernel_.empty(), "nn: xtrain.model.attention.kernel must be a kernel name or \"auto\", got \"\"");
  HS_ = embed_dim / num_heads;
  qkv = register_module("qkv", Linear(embed_dim, 3 * embed_dim));
  proj = register_module("proj", Linear(embed_dim, embed_dim));
}

std::string MultiScaleAttentionImpl::kernel_for(const at::Tensor& x) const {
  kernels::attention::AttentionCall call;
  call.B = x.size(0);
  call.NH = NH_;
  call.T = x.size(1);
  call.HS = HS_;
  call.dtype = x.scalar_type();
  call.device = x.device();
  call.causal = causal_;
  call.windows = windows_;
  call.dropout = is_training() ? dropout_ : 0.0;
  return kernels::attention::select_attention_kernel(kernel_, call);
}

at::Tensor MultiScaleAttentionImpl::forward(const at::Tensor& x) {
  XTRAIN_USAGE_CHECK(x.dim() == 3 && x.size(2) == C_, "nn: attention input must be [B, T, ", C_, "], got ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1);
  const bool drop = dropout_ > 0 && is_training();
  // [B, T, 3C] -> [3, B, NH, T, HS] as a view: q, k, v are strided [B, NH, T, HS] views.
  const auto heads = qkv->forward(x).view({B, T, 3, NH_, HS_}).permute({2, 0, 3, 1, 4});
  auto y = kernels::attention::run_attention(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2), causal_,
                                             windows_, drop ? dropout_ : 0.0, kernel_);
  // [B, NH, T, HS] -> [B, T, C]: free when the kernel returned [B, T, NH, HS] memory.
  y = proj->forward(y.transpose(1, 2).reshape({B, T, C_}));
  y = kernels::dropout(y, dropout_, drop);
  return y;
}

}  // namespace xtrain::nn
