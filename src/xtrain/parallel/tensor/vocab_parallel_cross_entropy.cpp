// Vocabulary-parallel cross-entropy as one autograd function (Megatron's _VocabParallelCrossEntropy):
// loss = log Σ_v exp(z_v − m) − (z_t − m) with m the global row maximum, every sum over v split
// across ranks and finished by an all-reduce. Saves the local softmax [..., V/tp] for backward.
#include "xtrain/parallel/tensor/vocab_parallel_cross_entropy.h"

#include <torch/csrc/autograd/custom_function.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::parallel::tensor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void all_reduce(at::Tensor& t, const CommPtr& tp, comm::ReduceOp op) {
  if (tp && tp->size() > 1) tp->all_reduce(t, op);
}

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& target,
                            const CommPtr& tp) {
    const int64_t n = logits.size(-1), rank = tp ? tp->rank() : 0;
    const at::Tensor z = logits.to(at::kFloat);
    at::Tensor max = std::get<0>(z.max(-1)).contiguous();
    all_reduce(max, tp, comm::ReduceOp::kMax);
    const at::Tensor shifted = z - max.unsqueeze(-1);
    // The target's shifted logit: from its owner, zero elsewhere, then summed.
    const at::Tensor local = target - rank * n;
    const at::Tensor mine = local.ge(0).logical_and(local.lt(n));
    const at::Tensor index = local.masked_fill(mine.logical_not(), 0).unsqueeze(-1);
    at::Tensor picked = shifted.gather(-1, index).squeeze(-1).masked_fill(mine.logical_not(), 0.0).contiguous();
    all_reduce(picked, tp, comm::ReduceOp::kSum);
    const at::Tensor exp = shifted.exp();
    at::Tensor sum = exp.sum(-1).contiguous();
    all_reduce(sum, tp, comm::ReduceOp::kSum);
    ctx->save_for_backward({exp / sum.unsqueeze(-1), index, mine});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return (sum.log() - picked).to(logits.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor grad = saved[0].clone();  // softmax over this rank's columns
    grad.scatter_add_(-1, saved[1], -saved[2].to(at::kFloat).unsqueeze(-1));
    grad.mul_(grads[0].to(at::kFloat).unsqueeze(-1));
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target, const CommPtr& tp) {
  XTRAIN_USAGE_CHECK(target.scalar_type() == at::kLong, "parallel: cross-entropy targets must be int64, got ",
                     target.scalar_type());
  TORCH_CHECK(logits.dim() == target.dim() + 1 && logits.sizes().slice(0, target.dim()) == target.sizes(),
              "parallel: logits ", logits.sizes(), " do not match targets ", target.sizes());
  return VocabParallelCrossEntropy::apply(logits, target, tp);
}

}  // namespace xtrain::parallel::tensor
