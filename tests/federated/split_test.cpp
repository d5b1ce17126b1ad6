// Client splits: partitions of the training set; the Dirichlet split follows its seed, its shares
// have the Dirichlet's closed-form moments, and alpha -> large gives the IID proportions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "support/errors.h"
#include "xtrain/federated/split.h"

namespace xtrain::federated::split_test {
namespace {

// Every index of [0, n) exactly once over the clients, each client's list sorted.
void expect_partition(const ClientIndices& parts, int64_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& p : parts) {
    EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
    for (int64_t i : p) ++seen.at(i);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n);
}

std::vector<int64_t> labels_mod(int64_t n, int64_t classes) {
  std::vector<int64_t> l(n);
  for (int64_t i = 0; i < n; ++i) l[i] = (i * 7) % classes;  // n / classes of each (7 and classes coprime)
  return l;
}

// counts[k][c]: samples of class c client k holds.
std::vector<std::vector<int64_t>> class_counts(const ClientIndices& parts, const std::vector<int64_t>& labels,
                                               int64_t classes) {
  std::vector<std::vector<int64_t>> counts(parts.size(), std::vector<int64_t>(classes, 0));
  for (size_t k = 0; k < parts.size(); ++k) {
    for (int64_t i : parts[k]) ++counts[k][labels[i]];
  }
  return counts;
}

TEST(FederatedSplit, IidAndContiguousArePartitions) {
  const auto iid = split_iid(1003, 7, 5);
  expect_partition(iid, 1003);
  for (const auto& p : iid) EXPECT_NEAR(static_cast<double>(p.size()), 1003.0 / 7, 1.0);
  EXPECT_NE(split_iid(1003, 7, 6), iid);  // the seed decides
  EXPECT_EQ(split_iid(1003, 7, 5), iid);
  const auto one = split_iid(50, 1, 5);  // one client: everything in order (== `xtrain train`'s view)
  std::vector<int64_t> all(50);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(one[0], all);
  const auto cont = split_contiguous(10, 3);
  EXPECT_EQ(cont, (ClientIndices{{0, 1, 2}, {3, 4, 5}, {6, 7, 8, 9}}));
}

TEST(FederatedSplit, ParseNamesTheFlag) {
  EXPECT_EQ(parse_split("iid").kind, SplitSpec::Kind::iid);
  EXPECT_EQ(parse_split("contiguous").kind, SplitSpec::Kind::contiguous);
  EXPECT_DOUBLE_EQ(parse_split("dirichlet:0.25").alpha, 0.25);
  EXPECT_NE(testing::expect_usage_error([] { parse_split("dirichlet:-1"); }).find("--split dirichlet:-1"), std::string::npos);
  EXPECT_NE(testing::expect_usage_error([] { parse_split("dirichlet:x"); }).find("must be a number > 0"), std::string::npos);
  EXPECT_NE(testing::expect_usage_error([] { parse_split("noniid"); }).find("want iid, dirichlet:ALPHA"), std::string::npos);
}

TEST(FederatedSplit, GammaDrawsHaveTheGammaMoments) {
  for (double shape : {0.3, 1.0, 2.5}) {
    uint64_t state = 99;
    const int n = 40000;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; ++i) {
      const double g = gamma_draw(shape, state);
      sum += g;
      sum2 += g * g;
    }
    const double mean = sum / n, var = sum2 / n - mean * mean;
    // Gamma(a, 1): mean a, variance a; the mean's standard error is sqrt(a / n).
    EXPECT_NEAR(mean, shape, 5 * std::sqrt(shape / n)) << shape;
    EXPECT_NEAR(var, shape, 0.08 * shape) << shape;
  }
}

TEST(FederatedSplit, DirichletFollowsTheSeedAndIsAPartition) {
  const auto labels = labels_mod(6000, 10);
  const auto a = split_dirichlet(labels, 10, 20, 0.5, 11);
  expect_partition(a, 6000);
  EXPECT_EQ(split_dirichlet(labels, 10, 20, 0.5, 11), a);
  EXPECT_NE(split_dirichlet(labels, 10, 20, 0.5, 12), a);
}

// p_c ~ Dir(alpha 1_K): E p_ck = 1/K, Var p_ck = (1/K)(1 - 1/K) / (K alpha + 1). The empirical
// spread of the shares n_ck / n_c over (c, k) follows it; alpha -> large leaves each count within
// a few standard deviations of n_c / K (the IID proportions), alpha small concentrates the classes.
TEST(FederatedSplit, DirichletSharesHaveTheClosedFormSpread) {
  const int64_t classes = 50, K = 10, per_class = 2000;
  const auto labels = labels_mod(classes * per_class, classes);
  for (double alpha : {0.1, 1.0, 10.0}) {
    const auto counts = class_counts(split_dirichlet(labels, classes, K, alpha, 3), labels, classes);
    double sum = 0, sum2 = 0;
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t c = 0; c < classes; ++c) {
        const double p = static_cast<double>(counts[k][c]) / per_class;
        sum += p;
        sum2 += p * p;
      }
    }
    const double n = static_cast<double>(K * classes), mean = sum / n, var = sum2 / n - mean * mean;
    const double expected = (1.0 / K) * (1 - 1.0 / K) / (K * alpha + 1);
    EXPECT_NEAR(mean, 1.0 / K, 1e-12) << alpha;  // each class is dealt out whole
    // 50 independent Dirichlet draws: the variance estimate is within ~25% (relative).
    EXPECT_NEAR(var, expected, 0.3 * expected) << alpha;
  }
  const double alpha = 1e4;
  const auto counts = class_counts(split_dirichlet(labels, classes, K, alpha, 3), labels, classes);
  const double sd = per_class * std::sqrt((1.0 / K) * (1 - 1.0 / K) / (K * alpha + 1)) + 1.0;  // + rounding
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < classes; ++c) EXPECT_NEAR(counts[k][c], per_class / K, 5 * sd) << k << " " << c;
  }
}

}  // namespace
}  // namespace xtrain::federated::split_test
