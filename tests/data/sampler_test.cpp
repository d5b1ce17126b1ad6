// DistributedSampler: the epoch order equals an independent Python implementation of
// splitmix64 + Fisher–Yates; shards are disjoint and cover the epoch; resume and epoch crossing
// are exact.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "xtrain/base/error.h"
#include "xtrain/data/sampler.h"

namespace xtrain::data::sampler_test {
namespace {

// /usr/bin/python3 -c "
// M=(1<<64)-1
// class SM:
//   def __init__(s,x): s.s=x&M
//   def next(s):
//     s.s=(s.s+0x9e3779b97f4a7c15)&M; z=s.s
//     z=((z^(z>>30))*0xbf58476d1ce4e5b9)&M; z=((z^(z>>27))*0x94d049bb133111eb)&M; return z^(z>>31)
//   def below(s,n):
//     t=((1<<64)-n)%n
//     while True:
//       x=s.next()
//       if x>=t: return x%n
// def perm(n,seed,epoch):
//   a=SM(seed).next(); r=SM(SM(a^epoch).next()); p=list(range(n))
//   for i in range(n-1,0,-1):
//     j=r.below(i+1); p[i],p[j]=p[j],p[i]
//   return p
// print(perm(10,1234,0)); print(perm(10,1234,1)); print(perm(10,7,0))"
TEST(Sampler, EpochOrderMatchesPythonReference) {
  DistributedSampler s(10, 1234);
  EXPECT_EQ(s.next(10), (std::vector<int64_t>{4, 5, 0, 8, 3, 6, 7, 9, 1, 2}));
  EXPECT_EQ(s.next(10), (std::vector<int64_t>{1, 9, 0, 2, 6, 3, 8, 4, 5, 7}));
  DistributedSampler other_seed(10, 7);
  EXPECT_EQ(other_seed.next(10), (std::vector<int64_t>{2, 0, 5, 7, 3, 9, 8, 1, 4, 6}));
}

TEST(Sampler, RanksTakeStridedPositions) {
  // Epoch 0 of (10, 1234) is 4 5 0 8 3 6 7 9 1 2; with W = 3 the tail (position 9) is dropped.
  DistributedSampler r0(10, 1234, 0, 3), r1(10, 1234, 1, 3), r2(10, 1234, 2, 3);
  EXPECT_EQ(r0.samples_per_epoch(), 3);
  EXPECT_EQ(r0.next(3), (std::vector<int64_t>{4, 8, 7}));
  EXPECT_EQ(r1.next(3), (std::vector<int64_t>{5, 3, 9}));
  EXPECT_EQ(r2.next(3), (std::vector<int64_t>{0, 6, 1}));
}

TEST(Sampler, ShuffleOffIsTheIdentity) {
  DistributedSampler s(5, 99, 0, 1, /*shuffle=*/false);
  EXPECT_EQ(s.next(7), (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1}));
  DistributedSampler r1(5, 99, 1, 2, false);
  EXPECT_EQ(r1.next(2), (std::vector<int64_t>{1, 3}));
}

TEST(Sampler, DeterministicAcrossInstances) {
  DistributedSampler a(1000, 42), b(1000, 42), c(1000, 43);
  const auto x = a.next(2500), y = b.next(2500), z = c.next(2500);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

TEST(Sampler, ShardsAreDisjointAndCoverEveryEpoch) {
  for (int64_t world : {1, 2, 3, 4, 7}) {
    const int64_t n = 103, per_rank = n / world;
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::set<int64_t> seen;
      for (int64_t r = 0; r < world; ++r) {
        DistributedSampler s(n, 5, r, world);
        s.set_state({epoch, 0});
        for (int64_t i : s.next(per_rank)) {
          EXPECT_TRUE(0 <= i && i < n);
          EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice, world " << world << " epoch " << epoch;
        }
      }
      EXPECT_EQ(int64_t(seen.size()), per_rank * world) << "world " << world;
    }
  }
}

TEST(Sampler, ResumeContinuesExactly) {
  DistributedSampler full(50, 11, 1, 2);
  const auto uninterrupted = full.next(37 + 60);
  DistributedSampler first(50, 11, 1, 2);
  auto taken = first.next(37);
  const SamplerState saved = first.state();
  EXPECT_EQ(saved.epoch, 1);  // 25 per epoch: 37 = one epoch + 12
  EXPECT_EQ(saved.position, 12);
  DistributedSampler resumed(50, 11, 1, 2);
  resumed.set_state(saved);
  const auto rest = resumed.next(60);
  taken.insert(taken.end(), rest.begin(), rest.end());
  EXPECT_EQ(taken, uninterrupted);
}

TEST(Sampler, EpochCrossingAndBoundaryState) {
  DistributedSampler s(6, 3);
  const auto two = s.next(12);
  std::vector<int64_t> e0(two.begin(), two.begin() + 6), e1(two.begin() + 6, two.end());
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(e1, e0);
  EXPECT_EQ(s.state().epoch, 2);  // an epoch taken exactly to its end rolls over
  EXPECT_EQ(s.state().position, 0);
}

TEST(Sampler, BadStatesAndSizesAreUsageErrors) {
  DistributedSampler s(10, 1, 0, 2);
  EXPECT_THROW(s.set_state({0, 6}), UsageError);
  EXPECT_THROW(s.set_state({-1, 0}), UsageError);
  EXPECT_THROW(DistributedSampler(3, 1, 0, 4), UsageError);
}

}  // namespace
}  // namespace xtrain::data::sampler_test
