// Cross-entropy over logits split along the vocabulary (Megatron's cross_entropy.py): each rank
// holds [..., V/tp] for its vocabulary range, and the loss is computed without gathering the
// [..., V] logits: one MAX all-reduce of the row maxima, one SUM all-reduce of the target's logit
// (only its owner contributes) and one of the exp-sums. Backward is local: softmax minus the one-hot
// of the target on its owner. Per-token losses, equal on every rank.
#pragma once
#include <ATen/core/Tensor.h>

#include "xtrain/parallel/tensor/mappings.h"

namespace xtrain::parallel::tensor {

// logits [..., V/tp] (this rank's columns, starting at vocab id tp_rank · V/tp), target int64 [...]
// with ids in [0, V) -> loss [...] (fp32 math; the logits' dtype otherwise).
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target, const CommPtr& tp);

}  // namespace xtrain::parallel::tensor
