// Losses: cross_entropy is at::cross_entropy_loss; focal_loss works on log p_t, with
// 1 - p_t = -expm1(log p_t), so neither tail (p_t -> 0 or -> 1) loses precision.
#include "xtrain/nn/losses.h"

#include "xtrain/nn/losses_registry.h"

#include <ATen/core/Reduction.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/expm1.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/tensor.h>

#include <limits>

#include "xtrain/base/error.h"

namespace xtrain::nn {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target, double label_smoothing) {
  return at::cross_entropy_loss(logits, target, /*weight=*/{}, at::Reduction::Mean, /*ignore_index=*/-100,
                                label_smoothing);
}

at::Tensor focal_loss(const at::Tensor& logits, const at::Tensor& target, double gamma, const at::Tensor& alpha) {
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
              "nn: focal_loss wants logits [N, V] and target [N], got ", logits.sizes(), " and ", target.sizes());
  // Reduced-precision logits are normalised in fp32 inside the kernel (no separate upcast copy).
  const auto acc = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto logp_t = at::log_softmax(logits, 1, acc).gather(1, target.unsqueeze(1)).squeeze(1);  // [N]
  auto loss = -logp_t;
  if (gamma != 0) {
    // 1 - p_t; the floor keeps the pow backward finite (γ < 1) when fp32 rounds p_t to exactly 1,
    // where the true (1-p_t)^γ and its gradient are ~0 anyway.
    const auto one_minus_p = (-at::expm1(logp_t)).clamp_min(std::numeric_limits<float>::min());
    loss = loss * one_minus_p.pow(gamma);
  }
  if (alpha.defined()) {
    XTRAIN_USAGE_CHECK(alpha.dim() == 1 && alpha.size(0) == logits.size(1), "nn: xtrain.loss.alpha has ",
                       alpha.numel(), " entries, but the model has ", logits.size(1), " classes");
    loss = loss * alpha.to(loss.options()).index_select(0, target);
  }
  return loss.mean();
}

namespace {

void check_cross_entropy(const LossOptions& o) {
  XTRAIN_USAGE_CHECK(o.alpha.empty(), "nn: xtrain.loss.alpha applies to focal only (xtrain.loss.type=", o.type, ")");
}

void check_focal(const LossOptions& o) {
  XTRAIN_USAGE_CHECK(o.gamma >= 0, "nn: xtrain.loss.gamma must be >= 0, got ", o.gamma);
  XTRAIN_USAGE_CHECK(o.label_smoothing == 0, "nn: xtrain.loss.label_smoothing applies to cross_entropy only, got ",
                     o.label_smoothing, " with xtrain.loss.type=focal");
  for (double a : o.alpha) XTRAIN_USAGE_CHECK(a >= 0, "nn: xtrain.loss.alpha entries must be >= 0, got ", a);
}

LossFn make_cross_entropy(const LossOptions& o) {
  const double smoothing = o.label_smoothing;
  return [smoothing](const at::Tensor& logits, const at::Tensor& target) {
    return cross_entropy(logits, target, smoothing);
  };
}

LossFn make_focal(const LossOptions& o) {
  const at::Tensor alpha = o.alpha.empty() ? at::Tensor() : at::tensor(o.alpha, at::kFloat);
  const double gamma = o.gamma;
  return [gamma, alpha](const at::Tensor& logits, const at::Tensor& target) {
    return focal_loss(logits, target, gamma, alpha);
  };
}

}  // namespace

std::vector<LossEntry> builtin_losses() {
  return {{"cross_entropy", "cross-entropy with label smoothing (torch.nn.functional.cross_entropy)",
           check_cross_entropy, make_cross_entropy},
          {"focal", "multi-class focal loss (Lin et al. 2017), optional per-class alpha", check_focal, make_focal}};
}

LossFn make_loss(const LossOptions& options) {
  const LossEntry& entry = find_loss(options.type);
  XTRAIN_USAGE_CHECK(options.label_smoothing >= 0 && options.label_smoothing <= 1,
                     "nn: xtrain.loss.label_smoothing must be in [0, 1], got ", options.label_smoothing);
  if (entry.check) entry.check(options);
  const LossFn loss = entry.make(options);
  return [loss](const at::Tensor& logits, const at::Tensor& target) {
    TORCH_CHECK(logits.dim() == target.dim() + 1, "nn: loss wants logits [..., V] and target [...], got ",
                logits.sizes(), " and ", target.sizes());
    // Low-precision logits (bf16 training, autocast) are upcast: the loss is computed in fp32.
    const bool low = logits.scalar_type() == at::kBFloat16 || logits.scalar_type() == at::kHalf;
    const at::Tensor full = low ? logits.to(at::kFloat) : logits;
    if (full.dim() == 2) return loss(full, target);
    return loss(full.reshape({-1, full.size(-1)}), target.reshape({-1}));
  };
}

}  // namespace xtrain::nn
