// ResNet-18 against tests/reference/gen_resnet.py: both sides fill every parameter and BN buffer
// from its name by one rule (model_fixture.h), so only inputs and outputs are stored: eval logits
// (running stats), train logits/loss, gradients of a few parameters, updated running stats.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "models/model_fixture.h"
#include "support/fixtures.h"
#include "xtrain/models/resnet.h"
#include "xtrain/nn/losses.h"

namespace xtrain::models::resnet_test {
namespace {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;
using xtrain::testing::rule_value;

// gen_resnet.py's resnet_rule: (amp, offset) from the name and shape.
std::pair<double, double> resnet_rule(const std::string& name, at::IntArrayRef shape) {
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (shape.size() == 4) return {std::sqrt(6.0 / static_cast<double>(shape[1] * shape[2] * shape[3])), 0.0};
  if (name.rfind("fc.", 0) == 0) return {1.0 / std::sqrt(512.0), 0.0};
  if (ends_with("running_mean")) return {0.1, 0.0};
  if (ends_with("running_var")) return {0.5, 1.0};
  if (ends_with("weight")) return {0.2, 1.0};
  return {0.1, 0.0};
}

// Fills parameters and buffers by the rule; checks names and first values against the fixture.
void fill_by_rule(torch::nn::Module& model, const std::map<std::string, at::Tensor>& fx) {
  at::NoGradGuard no_grad;
  size_t filled = 0;
  auto fill = [&](const std::string& name, at::Tensor& t) {
    if (name.find("num_batches_tracked") != std::string::npos) return;
    const auto [amp, offset] = resnet_rule(name, t.sizes());
    t.copy_(rule_value(name, t.sizes(), amp, offset));
    auto it = fx.find("head." + name);
    if (it == fx.end()) {
      ADD_FAILURE() << "reference has no tensor " << name;
      return;
    }
    expect_equal(t.reshape({-1}).narrow(0, 0, it->second.numel()), it->second, "rule values of " + name);
    ++filled;
  };
  for (auto& p : model.named_parameters()) fill(p.key(), p.value());
  for (auto& b : model.named_buffers()) fill(b.key(), b.value());
  EXPECT_EQ(filled, xtrain::testing::with_prefix(fx, "head.").size()) << "name sets differ";
}

TEST(ResNet18, MatchesPyTorchInEvalAndTrainMode) {
  const auto fx = xtrain::testing::load_tensors("resnet.pt");
  ResNet18 model(10);
  fill_by_rule(*model, fx);
  const auto& x = fx.at("input");
  // fp32 convolutions, the same library on both sides: observed bit-identical here. 1e-4 allows
  // other conv algorithms (oneDNN/BLAS versions) over 18 layers of up to 4608-term sums.
  const double rtol = 1e-4, atol = 1e-5;
  model->eval();
  {
    at::NoGradGuard no_grad;
    expect_close(model->forward(x), fx.at("eval.logits"), rtol, atol, "eval logits");
  }
  model->train();
  const auto logits = model->forward(x);
  expect_close(logits, fx.at("train.logits"), rtol, atol, "train logits");
  const auto loss = nn::cross_entropy(logits, fx.at("target"));
  expect_close(loss, fx.at("train.loss"), rtol, 0, "train loss");
  loss.backward();
  auto params = model->named_parameters();
  for (const auto& [key, expected] : xtrain::testing::with_prefix(fx, "grad.")) {
    ASSERT_TRUE(params.contains(key)) << key;
    // Backward through train-mode BN sums over the batch twice more: 5x looser.
    expect_close(params[key].grad(), expected, 5e-4, 1e-6, "grad of " + key);
  }
  auto buffers = model->named_buffers();
  for (const auto& [key, expected] : xtrain::testing::with_prefix(fx, "after.")) {
    expect_close(buffers[key], expected, rtol, atol, "after one train step: " + key);
  }
}

TEST(ResNet18, ParameterCountIsTheClosedForm) {
  ResNet18 model(10);
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  // conv1 + bn1; per stage two blocks of two 3x3 convs + BNs; downsample 1x1 conv + BN in stages 2-4; fc.
  int64_t expected = 9 * 64 + 2 * 64;
  const int64_t w[4] = {64, 128, 256, 512};
  int64_t in = 64;
  for (int s = 0; s < 4; ++s) {
    expected += 9 * in * w[s] + 9 * w[s] * w[s] + 4 * w[s];   // block 1
    expected += 2 * 9 * w[s] * w[s] + 4 * w[s];                // block 2
    if (s > 0) expected += in * w[s] + 2 * w[s];               // downsample
    in = w[s];
  }
  expected += 512 * 10 + 10;
  EXPECT_EQ(n, expected);
}

}  // namespace
}  // namespace xtrain::models::resnet_test
