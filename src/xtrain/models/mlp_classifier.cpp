// MlpClassifier: a flatten view, then GEMM + ReLU (in place) + dropout per hidden layer.
#include "xtrain/models/mlp_classifier.h"

#include <ATen/ops/dropout.h>

#include "xtrain/base/error.h"

namespace xtrain::models {

MlpClassifierImpl::MlpClassifierImpl(int64_t in_features, const std::vector<int64_t>& hidden, int64_t num_classes,
                                     double dropout)
    : in_features_(in_features), dropout_(dropout) {
  XTRAIN_USAGE_CHECK(in_features > 0, "models: mlp needs xtrain.model.in_features > 0, got ", in_features);
  XTRAIN_USAGE_CHECK(num_classes > 0, "models: mlp needs xtrain.model.num_classes > 0, got ", num_classes);
  XTRAIN_USAGE_CHECK(dropout >= 0 && dropout < 1, "models: xtrain.model.dropout must be in [0, 1), got ", dropout);
  hidden_ = register_module("hidden", torch::nn::ModuleList());
  int64_t in = in_features;
  for (int64_t width : hidden) {
    XTRAIN_USAGE_CHECK(width > 0, "models: xtrain.model.hidden widths must be > 0, got ", width);
    hidden_->push_back(nn::Linear(in, width));
    in = width;
  }
  head_ = register_module("head", nn::Linear(in, num_classes));
}

at::Tensor MlpClassifierImpl::forward(const at::Tensor& x) {
  XTRAIN_USAGE_CHECK(x.dim() >= 1 && x.size(0) > 0 && x.numel() / x.size(0) == in_features_,
                     "models: mlp input must have xtrain.model.in_features=", in_features_,
                     " elements per sample, got ", x.sizes());
  auto y = x.reshape({x.size(0), in_features_});
  const bool drop = dropout_ > 0 && is_training();
  for (const auto& m : *hidden_) {
    y = m->as<nn::LinearImpl>()->forward(y).relu_();
    if (drop) y = at::dropout(y, dropout_, /*train=*/true);
  }
  return head_->forward(y);
}

}  // namespace xtrain::models
