// CausalSelfAttention. Without dropout (GPT training here) the core is one autograd function over
// the fused [B, T, 3C] qkv output: one copy into head-major q, k, v, the scores S = q·kᵀ/√HS + mask
// from one routed GEMM in fp32 (scale fused; bf16 inputs, fp32 output), softmax in fp32, and
// y = P·v written by the GEMM straight into token-major [B, T, C] rows for proj (no copy back);
// backward mirrors it with one copy of dq, dk, dv into the [B, T, 3C] gradient. With dropout on the
// CPU the registry's fused dense kernel runs (dropout inside the tile, the mask regenerated in
// backward). A dtype/device neither takes gets the reference path: baddbmm(mask, q, kᵀ), softmax,
// dropout, bmm. Reference: nanoGPT's CausalSelfAttention (non-flash path), checked by tests/models/gpt_test.cpp.
#include "xtrain/nn/causal_self_attention.h"

#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/softmax.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/gemm.h"

namespace xtrain::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [B, T, 3C] -> contiguous [3, B, NH, T, HS] (q, k, v head-major): the one copy in, because
// oneDNN's fast (brgemm) matmul needs dense batched layouts; on the strided views of the fused
// tensor it falls back to gemm:jit, which ran 2-20x slower here (bf16 with a scale: 8 GFLOP/s).
at::Tensor split_qkv(const at::Tensor& qkv, int64_t NH) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  return qkv.view({B, T, 3, NH, C / NH}).permute({2, 0, 3, 1, 4}).contiguous();
}

// [B, T, C] as [B, NH, T, HS] (a view, "acbd": brgemm reads and writes it directly).
at::Tensor split_heads(const at::Tensor& y, int64_t NH) {
  const int64_t B = y.size(0), T = y.size(1), C = y.size(2);
  return y.view({B, T, NH, C / NH}).transpose(1, 2);
}

at::Tensor to_gemm_dtype(const at::Tensor& p, c10::ScalarType dtype) {
  return p.scalar_type() == dtype ? p : p.to(dtype);
}

struct AttentionCore : public torch::autograd::Function<AttentionCore> {
  // qkv [B, T, 3C] (fp32 or bf16), mask [T, T] fp32 additive (not differentiated) -> y [B, T, C].
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, const at::Tensor& mask, int64_t NH,
                            double scale) {
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
    const auto h = split_qkv(qkv, NH);
    auto S = at::empty({B, NH, T, T}, qkv.options().dtype(at::kFloat));
    kernels::GemmArgs score;
    score.alpha = scale;
    score.add = mask;
    kernels::gemm_out(S, h[0], h[1].transpose(2, 3), score);
    const auto P = at::_softmax(S, -1, false);
    const auto P_gemm = to_gemm_dtype(P, qkv.scalar_type());
    auto y = at::empty({B, T, C}, qkv.options());
    kernels::gemm_out(split_heads(y, NH), P_gemm, h[2]);
    ctx->save_for_backward({h, P, P_gemm});
    ctx->saved_data["NH"] = NH;
    ctx->saved_data["scale"] = scale;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &h = saved[0], &P = saved[1], &P_gemm = saved[2];
    const int64_t NH = ctx->saved_data["NH"].toInt();
    const double scale = ctx->saved_data["scale"].toDouble();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto dy = split_heads(grads[0].contiguous(), NH);  // [B, NH, T, HS]
    auto dP = at::empty_like(P);
    kernels::gemm_out(dP, dy, h[2].transpose(2, 3));
    const auto dS = to_gemm_dtype(at::_softmax_backward_data(dP, P, -1, at::kFloat), h.scalar_type());
    auto dh = at::empty_like(h);
    kernels::GemmArgs scaled;
    scaled.alpha = scale;
    kernels::gemm_out(dh[0], dS, h[1], scaled);
    kernels::gemm_out(dh[1], dS.transpose(2, 3), h[0], scaled);
    kernels::gemm_out(dh[2], P_gemm.transpose(2, 3), dy);
    // [3, B, NH, T, HS] -> [B, T, 3, NH, HS] = [B, T, 3C]: the one copy out.
    const int64_t B = h.size(1), T = h.size(3);
    auto dqkv = dh.permute({1, 3, 0, 2, 4}).reshape({B, T, 3 * h.size(2) * h.size(4)});
    return {dqkv, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

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

at::Tensor CausalSelfAttentionImpl::causal_bias(int64_t T, const at::TensorOptions& options) {
  if (!mask_.defined() || mask_.scalar_type() != options.dtype() || mask_.device() != options.device()) {
    mask_ = at::full({max_T_, max_T_}, -std::numeric_limits<double>::infinity(), options).triu_(1);
  }
  return mask_.narrow(0, 0, T).narrow(1, 0, T);  // broadcast over B·NH
}

at::Tensor CausalSelfAttentionImpl::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == C_, "nn: attention input must be [B, T, ", C_, "], got ", x.sizes());
  const int64_t T = x.size(1);
  TORCH_CHECK(T <= max_T_, "nn: attention got T=", T, " > seq_len ", max_T_);
  const bool drop = dropout_ > 0 && is_training();
  const auto fused = qkv->forward(x);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS_));
  at::Tensor y;
  if (!drop && kernels::gemm_supports(fused, fused)) {
    // The scores are fp32 whatever the activations' dtype, so the mask is too; dense for oneDNN.
    const auto mask = causal_bias(T, fused.options().dtype(at::kFloat));
    y = AttentionCore::apply(fused, T == max_T_ ? mask : mask.contiguous(), NH_, scale);
  } else if (drop && fused.is_cpu()) {
    // Attention dropout inside the registry's fused kernel (hash mask, regenerated in backward),
    // not on a materialised T×T matrix with ATen's per-element Bernoulli draws.
    const int64_t B = x.size(0);
    const auto heads = fused.view({B, T, 3, NH_, HS_}).permute({2, 0, 3, 1, 4});
    y = kernels::attention::run_attention(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2), /*causal=*/true,
                                          {}, dropout_, "auto")
            .transpose(1, 2)
            .reshape({B, T, C_});
  } else {
    y = reference_core(fused, T, drop, scale);
  }
  y = proj->forward(y);
  return kernels::dropout(y, dropout_, drop);
}

at::Tensor CausalSelfAttentionImpl::reference_core(const at::Tensor& fused, int64_t T, bool drop, double scale) {
  const int64_t B = fused.size(0);
  // [B, T, 3C] -> [3, B, NH, T, HS]: the one copy that makes q, k, v contiguous [B·NH, T, HS] views.
  const auto h = fused.view({B, T, 3, NH_, HS_}).permute({2, 0, 3, 1, 4}).contiguous();
  const auto q = h.select(0, 0).view({B * NH_, T, HS_});
  const auto k = h.select(0, 1).view({B * NH_, T, HS_});
  const auto v = h.select(0, 2).view({B * NH_, T, HS_});
  // scores [B·NH, T, T] = mask + (q·kᵀ)/√HS in one GEMM.
  auto att = at::baddbmm(causal_bias(T, fused.options()), q, k.transpose(1, 2), /*beta=*/1.0, /*alpha=*/scale);
  att = at::softmax(att, -1);
  if (drop) att = at::dropout(att, dropout_, /*train=*/true);
  // [B·NH, T, HS] -> [B, T, NH, HS] -> [B, T, C]: the copy back to token-major rows for proj.
  return at::bmm(att, v).view({B, NH_, T, HS_}).transpose(1, 2).reshape({B, T, C_});
}

}  // namespace xtrain::nn
