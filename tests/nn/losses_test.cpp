// Losses against tests/reference/gen_losses.py: cross-entropy with and without label smoothing
// (torch.nn.functional.cross_entropy) and focal loss (the paper's formula in float64), values and
// gradients wrt the logits, including a near-certain and a hopeless row; make_loss flattening and
// option errors.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/nn/losses.h"

namespace xtrain::nn::losses_test {
namespace {

using xtrain::testing::expect_close;
using Fixture = std::map<std::string, at::Tensor>;

const Fixture& fixture() {
  static const Fixture fx = xtrain::testing::load_tensors("losses.pt");
  return fx;
}

// fp32 log_softmax over 7 classes vs float64 (focal) or fp32 PyTorch (CE): observed <= 2.1e-7
// relative (a few fp32 ulps; the hopeless row's ~90 dominates the mean); 10x headroom.
constexpr double kRtol = 2e-6;
constexpr double kAtol = 1e-7;

void check(const std::string& name, const std::function<at::Tensor(const at::Tensor&)>& loss_of) {
  auto logits = fixture().at("logits").clone().requires_grad_();
  const auto loss = loss_of(logits);
  expect_close(loss, fixture().at(name + ".loss"), kRtol, kAtol, name + " loss");
  loss.backward();
  expect_close(logits.grad(), fixture().at(name + ".grad"), kRtol, kAtol, name + " grad");
}

TEST(Losses, CrossEntropyMatchesPyTorchWithAndWithoutLabelSmoothing) {
  const auto& t = fixture().at("target");
  check("ce0", [&](const at::Tensor& x) { return cross_entropy(x, t, 0.0); });
  check("ce01", [&](const at::Tensor& x) { return cross_entropy(x, t, 0.1); });
}

TEST(Losses, FocalMatchesThePapersFormula) {
  const auto& t = fixture().at("target");
  const auto& alpha = fixture().at("alpha");
  check("focal_g0", [&](const at::Tensor& x) { return focal_loss(x, t, 0.0); });
  check("focal_g2", [&](const at::Tensor& x) { return focal_loss(x, t, 2.0); });
  check("focal_g2_alpha", [&](const at::Tensor& x) { return focal_loss(x, t, 2.0, alpha); });
  check("focal_g05_alpha", [&](const at::Tensor& x) { return focal_loss(x, t, 0.5, alpha); });
  // γ = 0 without α is cross-entropy (against PyTorch's CE this time).
  check("ce0", [&](const at::Tensor& x) { return focal_loss(x, t, 0.0); });
}

TEST(Losses, MakeLossFlattensSequences) {
  torch::manual_seed(3);
  const auto logits = at::randn({2, 5, 11});
  const auto target = at::randint(0, 11, {2, 5}, at::kLong);
  LossOptions ce;
  ce.label_smoothing = 0.1;
  expect_close(make_loss(ce)(logits, target), cross_entropy(logits.reshape({10, 11}), target.reshape({10}), 0.1), 0, 0,
               "flattened CE");
  LossOptions focal;
  focal.type = "focal";
  focal.gamma = 2.0;
  focal.alpha = std::vector<double>(11, 0.5);
  expect_close(make_loss(focal)(logits, target),
               focal_loss(logits.reshape({10, 11}), target.reshape({10}), 2.0, at::full({11}, 0.5)), 0, 0,
               "flattened focal");
}

std::string usage_error(const LossOptions& o, int64_t classes = 4) {
  try {
    make_loss(o)(at::zeros({3, classes}), at::zeros({3}, at::kLong));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

TEST(Losses, BadOptionsNameTheirKey) {
  LossOptions o;
  o.label_smoothing = 1.5;
  EXPECT_NE(usage_error(o).find("xtrain.loss.label_smoothing"), std::string::npos);
  o = LossOptions();
  o.alpha = {1.0};
  EXPECT_NE(usage_error(o).find("xtrain.loss.alpha"), std::string::npos);  // CE has no alpha
  o.type = "focal";
  EXPECT_NE(usage_error(o).find("xtrain.loss.alpha has 1 entries"), std::string::npos);
  o.alpha = {};
  o.gamma = -1;
  EXPECT_NE(usage_error(o).find("xtrain.loss.gamma"), std::string::npos);
  o.gamma = 2;
  o.label_smoothing = 0.1;
  EXPECT_NE(usage_error(o).find("xtrain.loss.label_smoothing"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::nn::losses_test
