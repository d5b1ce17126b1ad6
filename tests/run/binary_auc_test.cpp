// Binary ROC AUC (run/class_metrics.h binary_auc) against its definition: the share of
// (positive, negative) pairs the positive scores higher, ties counting one half — worked by hand,
// and counted pair by pair (O(n^2), a different algorithm from the rank sum) on random scores with
// many ties. Also the logistic model's scores as evaluation reads them.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "xtrain/models/logistic.h"
#include "xtrain/run/class_metrics.h"

namespace xtrain::binary_auc_test {
namespace {

double pairwise_auc(const std::vector<double>& s, const std::vector<int64_t>& y) {
  double wins = 0.0, pairs = 0.0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] != 1 || y[j] != 0) continue;
      pairs += 1.0;
      wins += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
    }
  }
  return wins / pairs;
}

TEST(BinaryAuc, HandWorkedExampleWithTies) {
  // Positives score 0.9, 0.5, 0.3; negatives 0.5, 0.1. Pairs: (0.9 > 0.5, 0.9 > 0.1), (0.5 = 0.5: 1/2,
  // 0.5 > 0.1), (0.3 < 0.5, 0.3 > 0.1): 4.5 of 6.
  EXPECT_DOUBLE_EQ(binary_auc({0.9, 0.5, 0.5, 0.3, 0.1}, {1, 1, 0, 1, 0}), 4.5 / 6.0);
  EXPECT_DOUBLE_EQ(binary_auc({1, 2, 3}, {0, 0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(binary_auc({1, 2, 3}, {1, 0, 0}), 0.0);
  EXPECT_TRUE(std::isnan(binary_auc({1, 2}, {1, 1})));  // one class only
}

TEST(BinaryAuc, EqualsPairCountingOnRandomScoresWithTies) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> s;
    std::vector<int64_t> y;
    const int n = 5 + trial * 7;
    for (int i = 0; i < n; ++i) {
      y.push_back(static_cast<int64_t>(rng() % 3 == 0));
      s.push_back(static_cast<double>(rng() % 6) + 0.25 * y.back());  // few distinct values: many ties
    }
    if (std::count(y.begin(), y.end(), 1) == 0 || std::count(y.begin(), y.end(), 0) == 0) continue;
    EXPECT_NEAR(binary_auc(s, y), pairwise_auc(s, y), 1e-12) << "trial " << trial;
  }
}

TEST(BinaryAuc, LogisticModelScoresAreItsLogOdds) {
  models::LogisticRegression m(3);
  {
    at::NoGradGuard no_grad;
    m->parameters()[0].copy_(at::tensor({0.5f, -1.0f, 2.0f}).view({1, 3}));
    m->parameters()[1].fill_(0.25f);
  }
  const at::Tensor x = at::tensor({1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 1.0f}).view({3, 3});
  const at::Tensor logits = m->forward(x);
  // P(class 1) by softmax over [0, z] is sigmoid(z): BCE on z is the two-class cross-entropy.
  const at::Tensor z = at::tensor({0.75f, -0.75f, 2.25f});
  EXPECT_TRUE(at::allclose(at::softmax(logits, 1).select(1, 1), at::sigmoid(z)));
  EXPECT_NEAR(at::cross_entropy_loss(logits, at::tensor({1L, 0L, 0L})).item<double>(),
              at::binary_cross_entropy_with_logits(z, at::tensor({1.0f, 0.0f, 0.0f})).item<double>(), 1e-6);
  std::vector<double> scores;
  std::vector<int64_t> labels;
  append_binary_scores(logits, at::tensor({1L, 0L, 0L}), scores, labels);
  ASSERT_EQ(scores.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(scores[i], z[i].item<double>(), 1e-6);
  EXPECT_EQ(labels, (std::vector<int64_t>{1, 0, 0}));
}

}  // namespace
}  // namespace xtrain::binary_auc_test
