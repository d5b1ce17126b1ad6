// Column- and row-parallel Linear: the local GEMM is an nn::Linear (kernels::linear's routed GEMM)
// whose tensors are this module's parameters; the conjugate mappings put the collectives around it.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_like.h>

#include <mutex>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/tensor/column_parallel_linear.h"
#include "xtrain/parallel/tensor/row_parallel_linear.h"

namespace xtrain::parallel::tensor {

namespace {

int64_t group_size(const CommPtr& tp) { return tp ? tp->size() : 1; }
int64_t group_rank(const CommPtr& tp) { return tp ? tp->rank() : 0; }

int64_t shard(int64_t features, const CommPtr& tp, const char* what) {
  const int64_t n = group_size(tp);
  XTRAIN_USAGE_CHECK(features % n == 0, "parallel: tensor_parallel.size (", n, ") must divide the ", what, " (",
                     features, ")");
  return features / n;
}

// A Linear of the local shape whose own init leaves the CPU generator as it found it: only the
// full layer's draws count, so every later module draws what it would in the single-rank model.
nn::Linear local_linear(int64_t in, int64_t out, bool bias) {
  auto gen = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  nn::Linear local(in, out, bias);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
  return local;
}

}  // namespace

ColumnParallelLinearImpl::ColumnParallelLinearImpl(int64_t in_features, int64_t out_features, CommPtr tp, bool bias,
                                                   bool gather_output, int64_t stride)
    : tp_(std::move(tp)), out_features_(out_features), gather_output_(gather_output), stride_(stride) {
  XTRAIN_USAGE_CHECK(stride >= 1 && out_features % stride == 0, "parallel: column-parallel stride ", stride,
                     " must divide the output features (", out_features, ")");
  const int64_t n = shard(out_features / stride, tp_, "output features of a column-parallel linear") * stride;
  nn::Linear full(in_features, out_features, bias);  // the single-rank init, same generator draws
  local_ = local_linear(in_features, n, bias);
  load_full(full->weight, full->bias);
  weight = register_parameter("weight", local_->weight);
  if (bias) this->bias = register_parameter("bias", local_->bias);
}

void ColumnParallelLinearImpl::load_full(const at::Tensor& w, const at::Tensor& b) {
  TORCH_CHECK(w.size(0) == out_features_ && w.size(1) == local_->weight.size(1), "parallel: full weight ",
              w.sizes(), " does not match [", out_features_, ", ", local_->weight.size(1), "]");
  const int64_t block = out_features_ / stride_, n = local_->weight.size(0) / stride_, r = group_rank(tp_);
  at::NoGradGuard no_grad;
  for (int64_t s = 0; s < stride_; ++s) {
    local_->weight.narrow(0, s * n, n).copy_(w.narrow(0, s * block + r * n, n));
    if (local_->bias.defined()) local_->bias.narrow(0, s * n, n).copy_(b.narrow(0, s * block + r * n, n));
  }
}

at::Tensor ColumnParallelLinearImpl::forward(const at::Tensor& x) {
  at::Tensor y = local_->forward(copy_to_tensor_parallel(x, tp_));
  return gather_output_ ? gather_from_tensor_parallel(y, tp_) : y;
}

RowParallelLinearImpl::RowParallelLinearImpl(int64_t in_features, int64_t out_features, CommPtr tp, bool bias,
                                             bool input_is_parallel)
    : tp_(std::move(tp)), in_features_(in_features), input_is_parallel_(input_is_parallel) {
  const int64_t n = shard(in_features, tp_, "input features of a row-parallel linear");
  nn::Linear full(in_features, out_features, bias);
  local_ = local_linear(n, out_features, false);
  weight = register_parameter("weight", local_->weight);  // registered in nn::Linear's order
  if (bias) this->bias = register_parameter("bias", at::empty_like(full->bias));
  load_full(full->weight, full->bias);
}

void RowParallelLinearImpl::load_full(const at::Tensor& w, const at::Tensor& b) {
  const int64_t n = local_->weight.size(1), first = group_rank(tp_) * n;
  TORCH_CHECK(w.size(1) == in_features_ && w.size(0) == local_->weight.size(0), "parallel: full weight ",
              w.sizes(), " does not match [", local_->weight.size(0), ", ", in_features_, "]");
  at::NoGradGuard no_grad;
  local_->weight.copy_(w.narrow(1, first, n));
  if (bias.defined()) bias.copy_(b);
}

at::Tensor RowParallelLinearImpl::forward(const at::Tensor& x) {
  const at::Tensor x_local = input_is_parallel_ ? x : scatter_to_tensor_parallel(x, tp_);
  at::Tensor y = reduce_from_tensor_parallel(local_->forward(x_local), tp_);
  return bias.defined() ? y + bias : y;
}

}  // namespace xtrain::parallel::tensor
