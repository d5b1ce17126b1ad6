// Secure aggregation: the masks cancel in the ring exactly, every vector the server holds is far from
// the client's true update, dropout recovery gives the survivors' true sum; the DP accounting's
// closed form is the minimum over orders.
#include <gtest/gtest.h>

#include <ATen/Functions.h>

#include <cmath>
#include <vector>

#include "support/errors.h"
#include "xtrain/federated/privacy.h"
#include "xtrain/federated/secure_agg.h"

namespace xtrain::federated::secure_agg_test {
namespace {

struct Round {
  std::vector<int64_t> ids{2, 5, 6, 9, 13};
  std::vector<at::Tensor> updates;
  Round() {
    at::manual_seed(4);
    for (size_t i = 0; i < ids.size(); ++i) updates.push_back(at::randn({3000}, at::kDouble) * (0.01 * static_cast<double>(i + 1)));
  }
};

TEST(SecureAggregation, MaskedSumEqualsThePlainSum) {
  Round r;
  SecureAggregator server(3000);
  RingVector plain(3000, 0);
  at::Tensor float_sum = at::zeros({3000}, at::kDouble);
  for (size_t i = 0; i < r.ids.size(); ++i) {
    const RingVector enc = encode_fixed(r.updates[i], 5);
    for (size_t k = 0; k < enc.size(); ++k) plain[k] += enc[k];
    float_sum += r.updates[i];
    const RingVector masked = MaskingClient(r.ids[i], 3, 77).mask(enc, r.ids);
    // What the server holds differs from the true update almost everywhere, by ring-sized amounts.
    int64_t equal = 0;
    for (size_t k = 0; k < enc.size(); ++k) equal += masked[k] == enc[k];
    EXPECT_EQ(equal, 0);
    const double gap = (decode_fixed(masked) - r.updates[i]).abs().median().item<double>();
    EXPECT_GT(gap, 1e6) << "masked values are spread over the whole ring";
    server.receive(r.ids[i], masked);
  }
  const RingVector sum = server.unmasked_sum({}, [](int64_t, int64_t) -> uint64_t { ADD_FAILURE(); return 0; });
  EXPECT_EQ(sum, plain);  // the masks cancel bit for bit
  // The only error against float64: rounding each value to 2^-32, at most 5 * 2^-33.
  EXPECT_LE((decode_fixed(sum) - float_sum).abs().max().item<double>(), 5 * std::ldexp(1.0, -33));
  EXPECT_EQ(server.seeds_revealed(), 0);
}

TEST(SecureAggregation, DropoutRecoveryGivesTheSurvivorsTrueSum) {
  Round r;
  const std::vector<int64_t> dropped{5, 13};
  SecureAggregator server(3000), no_recovery(3000);
  at::Tensor survivors_sum = at::zeros({3000}, at::kDouble);
  for (size_t i = 0; i < r.ids.size(); ++i) {
    if (std::count(dropped.begin(), dropped.end(), r.ids[i])) continue;  // masked, never delivered
    const RingVector masked = MaskingClient(r.ids[i], 8, 77).mask(encode_fixed(r.updates[i], 5), r.ids);
    server.receive(r.ids[i], masked);
    no_recovery.receive(r.ids[i], masked);
    survivors_sum += r.updates[i];
  }
  const auto reveal = [](int64_t survivor, int64_t d) { return MaskingClient(survivor, 8, 77).reveal(d); };
  const at::Tensor got = decode_fixed(server.unmasked_sum(dropped, reveal));
  EXPECT_LE((got - survivors_sum).abs().max().item<double>(), 5 * std::ldexp(1.0, -33));
  EXPECT_EQ(server.seeds_revealed(), 3 * 2);  // each survivor, for each dropped peer
  // Without the revealed seeds the unmatched masks remain: the sum is noise.
  const at::Tensor garbage = decode_fixed(no_recovery.unmasked_sum({}, reveal));
  EXPECT_GT((garbage - survivors_sum).abs().median().item<double>(), 1e6);
}

TEST(SecureAggregation, PairSeedsAreSymmetricAndRoundBound) {
  EXPECT_EQ(pair_seed(1, 2, 3, 4), pair_seed(1, 2, 4, 3));
  EXPECT_NE(pair_seed(1, 2, 3, 4), pair_seed(1, 3, 3, 4));
  EXPECT_NE(pair_seed(1, 2, 3, 4), pair_seed(2, 2, 3, 4));
}

TEST(SecureAggregation, EncodingRefusesValuesOutsideTheRange) {
  const std::string big = testing::expect_usage_error([] { encode_fixed(at::full({2}, 1e9, at::kDouble), 4); });
  EXPECT_NE(big.find("--secure-agg: an update value 1e+09 is outside the fixed-point range"), std::string::npos) << big;
  const std::string nan = testing::expect_usage_error([] { encode_fixed(at::full({1}, NAN, at::kDouble), 1); });
  EXPECT_NE(nan.find("outside the fixed-point range"), std::string::npos) << nan;
  EXPECT_EQ(decode_fixed(encode_fixed(at::tensor({-1.5, 0.25, 3.0}, at::kDouble), 1)).sub(at::tensor({-1.5, 0.25, 3.0}, at::kDouble)).abs().max().item<double>(), 0.0);
}

// eps(R, sigma, delta) = min over alpha > 1 of R alpha / (2 sigma^2) + log(1/delta) / (alpha - 1): the
// closed form against a brute-force scan of the orders.
TEST(DifferentialPrivacy, RdpEpsilonIsTheMinimumOverOrders) {
  for (double sigma : {0.7, 1.1, 4.0}) {
    for (int64_t rounds : {1, 10, 200}) {
      const double delta = 1e-5;
      double best = INFINITY;
      for (double a = 1.0001; a < 2000; a *= 1.0005) {
        best = std::min(best, rounds * a / (2 * sigma * sigma) + std::log(1 / delta) / (a - 1));
      }
      EXPECT_NEAR(rdp_epsilon(sigma, rounds, delta), best, 1e-6 * best) << sigma << " " << rounds;
      const double a = rdp_best_order(sigma, rounds, delta);
      EXPECT_NEAR(rounds * a / (2 * sigma * sigma) + std::log(1 / delta) / (a - 1), best, 1e-6 * best);
    }
  }
  at::Tensor u = at::full({4}, 1.0, at::kFloat);  // norm 2
  EXPECT_DOUBLE_EQ(clip_update(u, 0.5), 2.0);
  EXPECT_NEAR(u.norm().item<double>(), 0.5, 1e-7);
  EXPECT_DOUBLE_EQ(clip_update(u, 10.0), 0.5);
  EXPECT_NEAR(u.norm().item<double>(), 0.5, 1e-7);  // under the bound: unchanged
}

}  // namespace
}  // namespace xtrain::federated::secure_agg_test
