// RowParallelLinear (Megatron's layers.py): the weight's input columns split across the
// tensor-parallel group; y = reduce(x_r · W_rᵀ) + b. reduce all-reduces the partial products and is
// identity in backward; the bias is whole on every rank and added once, after the reduction. The
// input is this rank's slice of [..., in] (input_is_parallel, as after a ColumnParallelLinear) or
// the full input, scattered here. Initialised as a full nn::Linear(in, out) drawn from the same
// generator on every rank, of which this rank keeps its columns.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/nn/linear.h"
#include "xtrain/parallel/tensor/mappings.h"

namespace xtrain::parallel::tensor {

class RowParallelLinearImpl : public torch::nn::Module {
 public:
  // UsageError when the group size does not divide in_features.
  RowParallelLinearImpl(int64_t in_features, int64_t out_features, CommPtr tp, bool bias = true,
                        bool input_is_parallel = true);
  // [..., in / tp] (input_is_parallel) or [..., in] -> [..., out], equal on every rank.
  at::Tensor forward(const at::Tensor& x);
  // Copies this rank's columns of a full weight [out, in], and the bias [out] (undefined: no bias).
  void load_full(const at::Tensor& weight, const at::Tensor& bias);

  // Registered as "weight" [out, in / tp] and "bias" [out].
  at::Tensor weight;
  at::Tensor bias;

 private:
  nn::Linear local_{nullptr};  // holds weight; not a registered submodule
  CommPtr tp_;
  int64_t in_features_;
  bool input_is_parallel_;
};
TORCH_MODULE(RowParallelLinear);

}  // namespace xtrain::parallel::tensor
