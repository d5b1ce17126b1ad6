// Shard arithmetic (shard_layout.h) as pure functions: for many shapes, unit groupings and world
// sizes, every element of every parameter is owned by exactly one rank, units are padded to
// world_size × alignment, and a rank's segments tile its shard buffer in layout order. The shard
// gradient norm (shard_ops.h) against a float64 reference.
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/shard_ops.h"

namespace xtrain::zero::shard_layout_test {
namespace {

NamedParams params_of(const std::vector<int64_t>& sizes) {
  NamedParams out;
  for (size_t i = 0; i < sizes.size(); ++i) out.emplace_back("p" + std::to_string(i), at::zeros({sizes[i]}));
  return out;
}

TEST(ShardLayout, EveryElementHasExactlyOneOwner) {
  const std::vector<std::vector<int64_t>> cases{{1}, {7, 5, 3}, {100, 1, 33, 64, 2}, {17, 17, 17, 17}, {1000}};
  for (const auto& sizes : cases) {
    const auto params = params_of(sizes);
    for (int64_t bucket : {1, 20, 1000000}) {
      for (int64_t W : {1, 2, 3, 4, 8}) {
        const auto units = units_by_size(params, bucket);
        const auto sl = make_shard_layout(params, {}, units, W, 4);
        std::vector<std::vector<int>> owners;
        for (auto n : sizes) owners.emplace_back(n, 0);
        int64_t shard_total = 0;
        for (const auto& u : sl.units) {
          EXPECT_EQ(u.numel % (W * 4), 0);
          EXPECT_EQ(u.local, shard_total);
          shard_total += u.shard;
        }
        EXPECT_EQ(shard_total, sl.shard_numel());
        for (int64_t r = 0; r < W; ++r) {
          int64_t local_end = 0;
          for (const auto& f : sl.fragments(r)) {
            EXPECT_GE(f.local, local_end) << "fragments in shard order";
            local_end = f.local + f.numel;
            for (int64_t e = f.start; e < f.start + f.numel; ++e) owners[f.slot][e] += 1;
            // The fragment is where the full buffer's owned range says it is.
            const auto& s = sl.flat.slots[f.slot];
            const int u = sl.unit_of_slot[f.slot];
            EXPECT_EQ(s.offset + f.start - sl.owned_begin(u, r), f.local - sl.units[u].local);
          }
          EXPECT_LE(local_end, sl.shard_numel());
        }
        for (size_t i = 0; i < sizes.size(); ++i) {
          for (int64_t e = 0; e < sizes[i]; ++e) {
            ASSERT_EQ(owners[i][e], 1) << "param " << i << " element " << e << " W " << W << " bucket " << bucket;
          }
        }
      }
    }
  }
}

TEST(ShardLayout, UnitsBySizeCloseAtTheBucketSize) {
  const auto params = params_of({10, 10, 25, 1, 40});
  EXPECT_EQ(units_by_size(params, 20), (std::vector<int>{0, 0, 1, 2, 2}));
  EXPECT_EQ(units_by_size(params, 1), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(units_by_size(params, 1000), (std::vector<int>(5, 0)));
  const auto sl = make_shard_layout(params, {}, units_by_size(params, 20), 2, 16);
  ASSERT_EQ(sl.units.size(), 3u);
  EXPECT_EQ(sl.units[0].numel, 32);  // 20 elements padded to 2 × 16
  EXPECT_EQ(sl.units[1].begin, 32);
  EXPECT_EQ(sl.flat.used, 86);
  EXPECT_EQ(sl.flat.numel, 32 + 32 + 64);
}

// Over 8.4M elements, with weighted ranges inside and across chunk borders, the chunked sum equals
// the float64 sum of squares within 1e-5 for bf16 and fp32 gradients (one fp32 norm over the
// whole buffer is off by about 1e-4 here); inf and NaN propagate.
TEST(ShardOps, WeightedNormOfBf16GradientsMatchesFloat64) {
  const int64_t n = (int64_t{1} << 23) + 1001;
  const auto grad = at::randn({n}).to(at::kBFloat16);
  const std::vector<WeightedRange> ranges{{5, 100, 0.5}, {(int64_t{1} << 22) - 7, 20, 0.25}, {n - 3, 3, 2.0}};
  const auto g = grad.to(at::kDouble);
  double expect = g.pow(2).sum().item<double>();
  for (const auto& r : ranges) expect += (r.weight - 1.0) * g.narrow(0, r.offset, r.numel).pow(2).sum().item<double>();
  EXPECT_NEAR(weighted_norm_squared(grad, ranges), expect, 1e-5 * expect);
  EXPECT_NEAR(weighted_norm_squared(grad.to(at::kFloat), ranges), expect, 1e-5 * expect);
  auto bad = grad.clone();
  bad[n - 1] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(weighted_norm_squared(bad, {})));
  bad[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(weighted_norm_squared(bad, {})));
}

}  // namespace
}  // namespace xtrain::zero::shard_layout_test
