// plan_buckets and gradient_scaling against hand-worked closed forms.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/parallel/data/bucket_plan.h"

namespace xtrain::parallel::bucket_plan_test {
namespace {

void expect_cover(const std::vector<BucketSpec>& b, int64_t total) {
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front().end, total);
  EXPECT_EQ(b.back().begin, 0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_EQ(b[i].end, b[i - 1].begin) << "buckets must be contiguous";
}

TEST(BucketPlan, ReverseOrderOnParameterBoundaries) {
  // Slots of 4, 6, 3, 5 elements and 2 elements of padding at the end.
  const std::vector<SlotRange> slots{{0, 4}, {4, 6}, {10, 3}, {13, 5}};
  const auto b = plan_buckets(slots, 20, 6);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].begin, 10);  // params 3 then 2: 5 + 3 >= 6 closes it; the padding rides along
  EXPECT_EQ(b[0].params, (std::vector<int>{3, 2}));
  EXPECT_EQ(b[1].begin, 4);
  EXPECT_EQ(b[1].params, (std::vector<int>{1}));
  EXPECT_EQ(b[2].params, (std::vector<int>{0}));
  expect_cover(b, 20);
}

TEST(BucketPlan, LargeBucketIsOneBucketAndTinyBucketIsOneParameterEach) {
  const std::vector<SlotRange> slots{{0, 4}, {4, 6}, {10, 3}, {13, 5}};
  const auto one = plan_buckets(slots, 18, 500000000);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].params, (std::vector<int>{3, 2, 1, 0}));
  expect_cover(one, 18);
  const auto each = plan_buckets(slots, 18, 1);
  ASSERT_EQ(each.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(each[i].params, (std::vector<int>{3 - i}));
  expect_cover(each, 18);
  // A parameter larger than the bucket is never split.
  const auto big = plan_buckets({{0, 2}, {2, 100}}, 102, 10);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].numel(), 100);
}

TEST(BucketPlan, SlotsGivenOutOfOrderAndErrors) {
  const auto b = plan_buckets({{5, 5}, {0, 5}}, 10, 5);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].params, (std::vector<int>{0}));
  EXPECT_THROW(plan_buckets({{0, 5}, {3, 5}}, 10, 5), c10::Error);  // overlap
  EXPECT_THROW(plan_buckets({{0, 5}}, 10, 0), UsageError);
}

TEST(GradScaling, DeepSpeedSemanticsAlwaysGiveTheMean) {
  struct Case {
    int64_t world;
    bool prescale;
    double factor, pre, post;
  };
  for (const Case& c : {Case{4, false, 1.0, 1.0, 0.25}, Case{4, true, 1.0, 0.25, 1.0}, Case{4, false, 2.0, 0.5, 0.5},
                        Case{4, false, 4.0, 0.25, 1.0}, Case{8, true, 2.0, 0.125, 1.0}}) {
    const auto s = gradient_scaling(c.world, c.prescale, c.factor);
    EXPECT_DOUBLE_EQ(s.pre, c.pre);
    EXPECT_DOUBLE_EQ(s.post, c.post);
    EXPECT_DOUBLE_EQ(s.pre * s.post, 1.0 / c.world);
  }
  EXPECT_THROW(gradient_scaling(2, false, 0.0), UsageError);
}

}  // namespace
}  // namespace xtrain::parallel::bucket_plan_test
