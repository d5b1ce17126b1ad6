// nn::LayerNorm over the last dimension (at::layer_norm, eps 1e-5 as torch.nn.LayerNorm):
// parameters "weight" (1) and "bias" (0), both [C].
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace xtrain::nn {

class LayerNormImpl : public torch::nn::Module {
 public:
  explicit LayerNormImpl(int64_t C, double eps = 1e-5);
  at::Tensor forward(const at::Tensor& x);  // [..., C] -> [..., C]

  at::Tensor weight;  // public as in torch::nn::LayerNormImpl
  at::Tensor bias;

 private:
  int64_t C_;
  double eps_;
};
TORCH_MODULE(LayerNorm);

}  // namespace xtrain::nn
