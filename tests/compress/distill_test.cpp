// Distillation loss against independent references: the soft term equals LibTorch's own kl_div
// (batchmean) of the tempered distributions times T², its gradient the closed form
// T·(softmax(s/T) − softmax(t/T))/rows, the mix α·soft + (1 − α)·hard, no gradient into the
// teacher; and one distillation fine-tune moves a student towards its teacher.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/compress/distill/distillation.h"
#include "xtrain/models/factory.h"

namespace xtrain::compress::distill_test {
namespace {

using xtrain::testing::expect_close;

TEST(Distill, SoftLossEqualsKlDivBatchmeanTimesTSquared) {
  at::manual_seed(1);
  const auto s = at::randn({6, 10}, at::kDouble) * 3;
  const auto t = at::randn({6, 10}, at::kDouble) * 3;
  for (double T : {1.0, 4.0}) {
    const auto got = soft_target_loss(s, t, T);
    // at::kl_div(input = log q, target = p, reduction sum) / rows: F.kl_div(..., 'batchmean').
    const auto ref = at::kl_div(at::log_softmax(s / T, -1), at::softmax(t / T, -1), at::Reduction::Sum) / 6 * (T * T);
    // Our loss runs in float32: float32 rounding of a sum of 10 terms per row.
    EXPECT_NEAR(got.item<double>(), ref.item<double>(), 1e-5 * std::max(1.0, ref.item<double>())) << "T=" << T;
  }
}

TEST(Distill, SoftLossGradientIsTheClosedForm) {
  at::manual_seed(2);
  const auto s = (at::randn({5, 7}) * 2).requires_grad_();
  const auto t = (at::randn({5, 7}) * 2).requires_grad_();
  const double T = 3.0;
  soft_target_loss(s, t, T).backward();
  // d/ds [T²·KL(p_t ‖ softmax(s/T))] per row = T·(softmax(s/T) − p_t); batchmean divides by rows.
  const auto expected = (at::softmax(s.detach() / T, -1) - at::softmax(t.detach() / T, -1)) * T / 5;
  expect_close(s.grad(), expected, 1e-5, 1e-6, "d soft / d student");
  EXPECT_FALSE(t.grad().defined() && t.grad().abs().sum().item<double>() > 0) << "the teacher got a gradient";
}

TEST(Distill, MixesSoftAndHardLoss) {
  at::manual_seed(3);
  const auto s = at::randn({4, 3, 11});  // language-model logits [B, T, V]: rows of V
  const auto t = at::randn({4, 3, 11});
  const auto y = at::randint(0, 11, {4, 3}, at::kLong);
  auto hard = [](const at::Tensor& logits, const at::Tensor& target) {
    return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
  };
  DistillOptions o;
  o.temperature = 2.0, o.alpha = 0.7;
  const auto got = distillation_loss(s, t, y, o, hard).item<double>();
  const double soft = soft_target_loss(s.reshape({12, 11}), t.reshape({12, 11}), 2.0).item<double>();
  EXPECT_NEAR(got, 0.7 * soft + 0.3 * hard(s, y).item<double>(), 1e-6);
  o.alpha = 0.0;
  EXPECT_NEAR(distillation_loss(s, t, y, o, hard).item<double>(), hard(s, y).item<double>(), 1e-7);
  o.alpha = 1.5;
  EXPECT_THROW(distillation_loss(s, t, y, o, hard), UsageError);
  EXPECT_THROW(soft_target_loss(s, t, 0.0), UsageError);
}

TEST(Distill, StudentMovesTowardsTeacher) {
  models::ModelOptions big, small;
  big.type = small.type = "mlp";
  big.in_features = small.in_features = 16;
  big.num_classes = small.num_classes = 4;
  big.hidden = {64}, small.hidden = {8};
  at::manual_seed(1);
  auto teacher = models::build_model(big);
  auto student = models::build_model(small);
  teacher.module->eval();
  const auto x = at::randn({64, 16});
  const auto teacher_logits = teacher.forward(x).detach();
  auto gap = [&] { return soft_target_loss(student.forward(x), teacher_logits, 2.0).item<double>(); };
  const double before = gap();
  torch::optim::Adam opt(student.module->parameters(), torch::optim::AdamOptions(1e-2));
  DistillOptions o;
  o.temperature = 2.0, o.alpha = 1.0;
  for (int i = 0; i < 50; ++i) {
    opt.zero_grad();
    distillation_loss(student.forward(x), teacher_logits, at::Tensor(), o, nullptr).backward();
    opt.step();
  }
  EXPECT_LT(gap(), 0.5 * before);
}

}  // namespace
}  // namespace xtrain::compress::distill_test
