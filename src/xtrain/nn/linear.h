// nn::Linear: y = x · weightᵀ + bias, every GEMM through kernels::linear (the one place where the
// GEMM backend is chosen). Parameters `weight` [out, in] and optional `bias` [out]; initialised as
// torch.nn.Linear (kaiming_uniform a=√5, bias U(±1/√in)), so models that keep the default init
// train like their PyTorch twins.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace xtrain::nn {

class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  at::Tensor forward(const at::Tensor& x);  // [..., in] -> [..., out]
  void reset_parameters();                  // PyTorch's default init

  // Public like torch::nn::LinearImpl's, so code reads the same on either; registered as
  // "weight" and "bias" (bias undefined when disabled).
  at::Tensor weight;
  at::Tensor bias;
};
TORCH_MODULE(Linear);

}  // namespace xtrain::nn
