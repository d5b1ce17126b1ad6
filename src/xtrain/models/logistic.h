// Logistic regression for a binary label (`xtrain.model.type: logistic`): one linear layer whose
// output z is the log-odds of class 1, P(1 | x) = sigmoid(z). Design choice: forward returns the
// two-class logits [0, z], for which the classify task's softmax cross-entropy is exactly the
// binary cross-entropy on z (log(1 + e^z) - y z) and argmax is "sigmoid(z) > 0.5", so training,
// evaluation (accuracy, AUC) and checkpoints treat it as any 2-class classifier. Weights start at
// zero (the loss is convex: every start reaches the same optimum). Parameters "linear.weight" [1, F]
// and "linear.bias" [1].
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "xtrain/models/registry.h"
#include "xtrain/nn/linear.h"

namespace xtrain::models {

class LogisticRegressionImpl : public torch::nn::Module {
 public:
  explicit LogisticRegressionImpl(int64_t in_features);
  at::Tensor log_odds(const at::Tensor& x);  // [B, ...] with in_features elements per sample -> [B]
  at::Tensor forward(const at::Tensor& x);   // [B, 2]: [0, z]

 private:
  nn::Linear linear_{nullptr};
  int64_t in_features_;
};
TORCH_MODULE(LogisticRegression);

ModelEntry logistic_entry();  // registered as "logistic" (registry.cpp)

}  // namespace xtrain::models
