// nn::Embedding: a lookup table "weight" [num, dim] (at::embedding, dense gradient), initialised
// N(0, 1) as torch.nn.Embedding; models re-initialise as they need.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace xtrain::nn {

class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t num, int64_t dim);
  at::Tensor forward(const at::Tensor& idx);  // int64 [...] -> [..., dim]

  at::Tensor weight;  // public as in torch::nn::EmbeddingImpl
};
TORCH_MODULE(Embedding);

}  // namespace xtrain::nn
