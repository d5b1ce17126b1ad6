// VocabParallelEmbedding (Megatron's layers.py): the table's vocabulary rows split across the
// tensor-parallel group; each rank looks up the ids in its range [first, first + V/tp), writes zeros
// for the others, and the partial results are all-reduced (reduce: identity in backward, so each
// rank's table gets the gradient of its own rows only). Initialised as a full nn::Embedding(V, C)
// drawn from the same generator on every rank, of which this rank keeps its rows.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/parallel/tensor/mappings.h"

namespace xtrain::parallel::tensor {

class VocabParallelEmbeddingImpl : public torch::nn::Module {
 public:
  // UsageError when the group size does not divide vocab.
  VocabParallelEmbeddingImpl(int64_t vocab, int64_t dim, CommPtr tp);
  at::Tensor forward(const at::Tensor& idx);  // int64 [...] -> [..., dim], equal on every rank

  int64_t vocab_first() const { return first_; }  // this rank's first row
  int64_t vocab_size() const { return vocab_; }   // the full V

  at::Tensor weight;  // registered "weight" [V / tp, dim]

 private:
  CommPtr tp_;
  int64_t vocab_, first_;
};
TORCH_MODULE(VocabParallelEmbedding);

}  // namespace xtrain::parallel::tensor
