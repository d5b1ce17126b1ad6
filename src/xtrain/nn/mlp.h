// The transformer MLP of GPT-2: `fc` (C -> 4C), GELU with the tanh approximation (as GPT-2 was
// trained), `proj` (4C -> C, a residual projection), dropout. Plain ops: no fusion yet.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/nn/linear.h"

namespace xtrain::nn {

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t C, double dropout);
  at::Tensor forward(const at::Tensor& x);  // [..., C] -> [..., C]

  Linear fc{nullptr};
  Linear proj{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(Mlp);

}  // namespace xtrain::nn
