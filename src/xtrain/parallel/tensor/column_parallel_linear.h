// ColumnParallelLinear (Megatron's layers.py): the weight's output rows split across the
// tensor-parallel group; y_r = copy(x) · W_rᵀ + b_r. copy is identity forward and all-reduces the
// input gradient in backward. With gather_output the slices are all-gathered to the full [..., out].
// Initialised as a full nn::Linear(in, out) drawn from the same generator on every rank, of which
// this rank keeps its rows: same seed, same weights as the single-rank model.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/nn/linear.h"
#include "xtrain/parallel/tensor/mappings.h"

namespace xtrain::parallel::tensor {

class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  // `stride`: the output features are that many equal blocks (a fused q, k, v projection: 3),
  // each split across the ranks on its own, so rank r holds its rows of every block, in block order.
  // UsageError when tp · stride does not divide out_features.
  ColumnParallelLinearImpl(int64_t in_features, int64_t out_features, CommPtr tp, bool bias = true,
                           bool gather_output = false, int64_t stride = 1);
  // [..., in] -> [..., out / tp] (this rank's slice), or [..., out] with gather_output.
  at::Tensor forward(const at::Tensor& x);
  // Copies this rank's rows (of each stride block) of a full weight [out, in] and bias [out]
  // (undefined: no bias). With gather_output and stride > 1 the gathered output is in rank-major
  // order, not the full layer's.
  void load_full(const at::Tensor& weight, const at::Tensor& bias);
  int64_t stride() const { return stride_; }

  // Registered as "weight" [out / tp, in] and "bias" [out / tp].
  at::Tensor weight;
  at::Tensor bias;

 private:
  nn::Linear local_{nullptr};  // holds weight and bias; not a registered submodule
  CommPtr tp_;
  int64_t out_features_;
  bool gather_output_;
  int64_t stride_;
};
TORCH_MODULE(ColumnParallelLinear);

}  // namespace xtrain::parallel::tensor
