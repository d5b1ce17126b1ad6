// A multilayer perceptron classifier: flatten -> [Linear -> ReLU -> dropout] per hidden width ->
// Linear to num_classes. Parameters "hidden.<i>.weight/bias" and "head.weight/bias"; PyTorch's
// default Linear init.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "xtrain/nn/linear.h"

namespace xtrain::models {

class MlpClassifierImpl : public torch::nn::Module {
 public:
  MlpClassifierImpl(int64_t in_features, const std::vector<int64_t>& hidden, int64_t num_classes, double dropout);
  at::Tensor forward(const at::Tensor& x);  // [B, ...] with in_features elements per sample -> [B, classes]

 private:
  torch::nn::ModuleList hidden_{nullptr};  // of nn::Linear
  nn::Linear head_{nullptr};
  int64_t in_features_;
  double dropout_;
};
TORCH_MODULE(MlpClassifier);

}  // namespace xtrain::models
