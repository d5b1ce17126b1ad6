// ParallelBlock: nn::Block (pre-LayerNorm GPT-2 block) with tensor-parallel attention (heads split)
// and MLP (fc column-parallel over the 4C hidden units, proj row-parallel): two all-reduces forward
// and two backward per block, Megatron's layout. LayerNorms and the residual stream are whole on
// every rank. Parameter names as nn::Block's ("ln1", "attn.qkv", "attn.proj", "ln2", "mlp.fc",
// "mlp.proj"), so the shards map to the single-rank names; init draws as nn::Block's, sliced.
// No dropout yet (see ParallelSelfAttention).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/nn/layer_norm.h"
#include "xtrain/parallel/tensor/column_parallel_linear.h"
#include "xtrain/parallel/tensor/parallel_self_attention.h"
#include "xtrain/parallel/tensor/row_parallel_linear.h"

namespace xtrain::parallel::tensor {

class ParallelMlpImpl : public torch::nn::Module {
 public:
  ParallelMlpImpl(int64_t C, CommPtr tp);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C]: proj(gelu_tanh(fc(x)))

  ColumnParallelLinear fc{nullptr};  // [4C / tp, C]
  RowParallelLinear proj{nullptr};   // [C, 4C / tp]
};
TORCH_MODULE(ParallelMlp);

class ParallelBlockImpl : public torch::nn::Module {
 public:
  // UsageError when tp does not divide NH, or dropout > 0.
  ParallelBlockImpl(int64_t C, int64_t NH, int64_t max_T, CommPtr tp, double dropout = 0.0);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C], equal on every rank

  nn::LayerNorm ln1{nullptr};
  ParallelSelfAttention attn{nullptr};
  nn::LayerNorm ln2{nullptr};
  ParallelMlp mlp{nullptr};
};
TORCH_MODULE(ParallelBlock);

}  // namespace xtrain::parallel::tensor
