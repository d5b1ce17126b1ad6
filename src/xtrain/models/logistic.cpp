// Logistic regression (logistic.h): a registered classifier of exactly two classes.
#include "xtrain/models/logistic.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>

#include "xtrain/base/error.h"

namespace xtrain::models {

LogisticRegressionImpl::LogisticRegressionImpl(int64_t in_features) : in_features_(in_features) {
  linear_ = register_module("linear", nn::Linear(in_features, 1));
  at::NoGradGuard no_grad;
  linear_->weight.zero_();
  linear_->bias.zero_();
}

at::Tensor LogisticRegressionImpl::log_odds(const at::Tensor& x) {
  const at::Tensor flat = x.reshape({x.size(0), -1});
  TORCH_CHECK(flat.size(1) == in_features_, "models: logistic expects ", in_features_, " features per sample, got ",
              flat.size(1));
  return linear_->forward(flat).squeeze(1);
}

at::Tensor LogisticRegressionImpl::forward(const at::Tensor& x) {
  const at::Tensor z = log_odds(x).unsqueeze(1);
  return at::cat({at::zeros_like(z), z}, 1);
}

namespace {

void check_logistic(const ModelOptions& o) {
  XTRAIN_USAGE_CHECK(o.num_classes == 0 || o.num_classes == 2, "models: logistic is a binary classifier; the ",
                     "labels give ", o.num_classes, " classes (xtrain.model.num_classes; use mlp for more)");
}

}  // namespace

ModelEntry logistic_entry() {
  ModelEntry e;
  e.description = "logistic regression: one linear layer, P(y = 1) = sigmoid(w.x + b) (binary labels)";
  e.task = "classify";
  e.keys = {{"in_features", "features (0: from the dataset)"}, {"num_classes", "must be 2 (0: from the dataset)"}};
  e.validate = check_logistic;
  e.build = [](const ModelOptions& o) {
    check_logistic(o);
    XTRAIN_USAGE_CHECK(o.in_features > 0, "models: logistic needs xtrain.model.in_features > 0 (set it or use a csv ",
                       "dataset), got ", o.in_features);
    auto module = LogisticRegression(o.in_features).ptr();
    return Model{module, [module](const at::Tensor& x) { return module->forward(x); }, "classify", o};
  };
  return e;
}

}  // namespace xtrain::models
