// ParallelSelfAttention (Megatron's ParallelAttention): causal self-attention with the heads split
// across the tensor-parallel group. The fused qkv projection is column-parallel with stride 3
// (rank r holds the q, k and v rows of heads [r·NH/tp, (r+1)·NH/tp)), attention runs on the local
// heads with no communication, and proj is row-parallel over those heads' channels: one all-reduce
// in forward (proj) and one in backward (the copy before qkv). Same parameter names and init as
// nn::CausalSelfAttention, sliced. The core is the reference path (baddbmm, softmax, bmm), not
// nn's fused one; dropout is not supported yet (its masks would need a per-rank generator).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/parallel/tensor/column_parallel_linear.h"
#include "xtrain/parallel/tensor/row_parallel_linear.h"

namespace xtrain::parallel::tensor {

class ParallelSelfAttentionImpl : public torch::nn::Module {
 public:
  // UsageError when tp does not divide NH, or dropout > 0.
  ParallelSelfAttentionImpl(int64_t C, int64_t NH, int64_t max_T, CommPtr tp, double dropout = 0.0);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C], equal on every rank

  ColumnParallelLinear qkv{nullptr};  // [3C / tp, C]
  RowParallelLinear proj{nullptr};    // [C, C / tp]

 private:
  int64_t C_, local_heads_, HS_, max_T_;
};
TORCH_MODULE(ParallelSelfAttention);

}  // namespace xtrain::parallel::tensor
