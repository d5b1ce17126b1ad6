// MlpClassifier against tests/reference/gen_resnet.py's MLP (fixtures/mlp.pt): logits, loss and
// every gradient; dropout only in train mode.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "models/model_fixture.h"
#include "support/fixtures.h"
#include "xtrain/models/mlp_classifier.h"
#include "xtrain/nn/losses.h"

namespace xtrain::models::mlp_test {
namespace {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;

TEST(MlpClassifier, MatchesPyTorch) {
  const auto fx = xtrain::testing::load_tensors("mlp.pt");
  MlpClassifier model(64, std::vector<int64_t>{32, 16}, 10, 0.0);
  xtrain::testing::load_parameters(*model, xtrain::testing::with_prefix(fx, "param."));
  const auto logits = model->forward(fx.at("input"));
  // fp32, three GEMMs of <= 64-term sums: a few ulps.
  expect_close(logits, fx.at("logits"), 1e-5, 1e-6, "logits");
  const auto loss = nn::cross_entropy(logits, fx.at("target"));
  expect_close(loss, fx.at("loss"), 1e-5, 0, "loss");
  loss.backward();
  for (const auto& p : model->named_parameters()) {
    expect_close(p.value().grad(), fx.at("grad." + p.key()), 1e-5, 1e-7, "grad of " + p.key());
  }
}

TEST(MlpClassifier, DropoutOnlyInTrainMode) {
  const auto fx = xtrain::testing::load_tensors("mlp.pt");
  MlpClassifier model(64, std::vector<int64_t>{32, 16}, 10, 0.5);
  xtrain::testing::load_parameters(*model, xtrain::testing::with_prefix(fx, "param."));
  model->eval();
  const auto eval = model->forward(fx.at("input"));
  expect_close(eval, fx.at("logits"), 1e-5, 1e-6, "eval logits with dropout 0.5");
  model->train();
  EXPECT_FALSE(at::allclose(model->forward(fx.at("input")), eval));
}

}  // namespace
}  // namespace xtrain::models::mlp_test
