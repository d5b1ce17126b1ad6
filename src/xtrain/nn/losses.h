// Training losses over logits [N, V] and int64 targets [N], mean-reduced: cross-entropy with label
// smoothing (== torch.nn.functional.cross_entropy) and multi-class focal loss (Lin et al. 2017,
// "Focal Loss for Dense Object Detection": -α_t (1-p_t)^γ log p_t), the latter computed from
// log_softmax so that p_t -> 0 or 1 stays finite. make_loss flattens [B, T, V] / [B, T] inputs.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>

#include "xtrain/nn/options.h"

namespace xtrain::nn {

// torch.nn.functional.cross_entropy(logits, target, label_smoothing=label_smoothing), mean.
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target, double label_smoothing = 0.0);

// mean over N of -α_t (1-p_t)^γ log p_t; `alpha` [V] per-class weights or undefined (α_t = 1).
// γ = 0 without alpha equals cross_entropy(logits, target).
at::Tensor focal_loss(const at::Tensor& logits, const at::Tensor& target, double gamma,
                      const at::Tensor& alpha = at::Tensor());

using LossFn = std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& target)>;

// The configured loss (xtrain.loss). Accepts logits [N, V] with target [N], or [B, T, V] with
// [B, T] (flattened as views). Options are checked here (UsageError naming the key).
LossFn make_loss(const LossOptions& options);

}  // namespace xtrain::nn
