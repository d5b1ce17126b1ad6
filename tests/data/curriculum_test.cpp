// CurriculumScheduler against closed forms written independently of its floating-point code: the
// root schedules in exact integer arithmetic (floor((s/T)^(1/k)·R) = the largest m with
// m^k·T <= s·R^k), checked at every step of three shapes, plus a table of listed steps computed with
// DeepSpeed's own Python expression; fixed_discrete and the freeze at max_difficulty as DeepSpeed's
// update_difficulty; truncation of [B, T] batches.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/data/curriculum.h"

namespace xtrain::data::curriculum_test {
namespace {

CurriculumOptions root_options(int64_t min, int64_t max, int64_t T, int64_t q, int64_t k) {
  CurriculumOptions o;
  o.enabled = true;
  o.min_difficulty = min;
  o.max_difficulty = max;
  o.total_curriculum_step = T;
  o.difficulty_step = q;
  o.root_degree = k;
  o.schedule_type = k == 1 ? "fixed_linear" : "fixed_root";
  return o;
}

int64_t ipow(int64_t b, int64_t k) {
  int64_t r = 1;
  while (k-- > 0) r *= b;
  return r;
}

// Exact: m = max{m : m^k · T <= s · R^k}, v = min + m, rounded down to a multiple of q, raised to
// the first multiple of q >= min, capped at max.
int64_t closed_form(int64_t s, const CurriculumOptions& o) {
  const int64_t R = o.max_difficulty - o.min_difficulty, k = o.root_degree, T = o.total_curriculum_step;
  int64_t m = 0;
  while (ipow(m + 1, k) * T <= s * ipow(R, k)) ++m;
  const int64_t q = o.difficulty_step;
  int64_t v = o.min_difficulty + m;
  v -= v % q;
  v = std::max(v, (o.min_difficulty + q - 1) / q * q);
  return std::min(v, o.max_difficulty);
}

TEST(Curriculum, RootSchedulesMatchTheExactClosedFormAtEveryStep) {
  for (const auto& o : {root_options(8, 1024, 1000, 8, 1), root_options(64, 1024, 500, 16, 2),
                        root_options(12, 203, 300, 8, 3)}) {
    const CurriculumScheduler c(o);
    for (int64_t s = 0; s < 3 * o.total_curriculum_step; ++s) {
      ASSERT_EQ(c.difficulty_at(s), closed_form(s, o))
          << o.schedule_type << " k=" << o.root_degree << " T=" << o.total_curriculum_step << " step " << s;
    }
  }
}

TEST(Curriculum, ListedStepsMatchDeepSpeedsExpression) {
  // /usr/bin/python3: v = math.floor((float(s)/T)**(1.0/k)*(mx-mn)+mn); v -= v % q;
  //                   v = max(v, -(-mn//q)*q); v = min(v, mx)
  const std::vector<int64_t> steps = {0, 1, 2, 10, 50, 100, 250, 499, 500, 501, 750, 999, 1000, 1001, 2000};
  const std::vector<std::pair<CurriculumOptions, std::vector<int64_t>>> cases = {
      {root_options(8, 1024, 1000, 8, 1), {8, 8, 8, 16, 56, 104, 256, 512, 512, 512, 768, 1016, 1024, 1024, 1024}},
      {root_options(64, 1024, 500, 16, 2),
       {64, 96, 112, 192, 352, 480, 736, 1008, 1024, 1024, 1024, 1024, 1024, 1024, 1024}},
      // min 12 is not a multiple of q = 8: the first length is 16, not 8; 203 is reached only
      // after T, when (s/T)^(1/3) > 1 pushes v past max before the cap.
      {root_options(12, 203, 300, 8, 3), {16, 40, 40, 72, 112, 144, 184, 203, 203, 203, 203, 203, 203, 203, 203}},
  };
  for (const auto& [o, want] : cases) {
    const CurriculumScheduler c(o);
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(c.difficulty_at(steps[i]), want[i]) << o.schedule_type << " k=" << o.root_degree << " step "
                                                    << steps[i];
    }
  }
}

TEST(Curriculum, FixedDiscreteAndTheFreezeAtMaxDifficulty) {
  CurriculumOptions o;
  o.enabled = true;
  o.schedule_type = "fixed_discrete";
  o.min_difficulty = 16;
  o.max_difficulty = 128;
  o.difficulty = {16, 128, 64};  // not monotone, to show the freeze
  o.max_step = {5, 10};
  CurriculumScheduler c(o);
  EXPECT_EQ(c.current(), 16);
  // difficulty[i] for the first i with s <= max_step[i]; after the last max_step, the last one.
  for (int64_t s = 0; s <= 5; ++s) EXPECT_EQ(c.difficulty_at(s), 16) << s;
  for (int64_t s = 6; s <= 10; ++s) EXPECT_EQ(c.difficulty_at(s), 128) << s;
  for (int64_t s = 11; s <= 20; ++s) EXPECT_EQ(c.difficulty_at(s), 64) << s;
  // update(): once 128 = max_difficulty is reached it stays, though the pacing says 64.
  for (int64_t s = 1; s <= 5; ++s) EXPECT_EQ(c.update(s), 16) << s;
  EXPECT_EQ(c.update(6), 128);
  EXPECT_EQ(c.update(11), 128);
  EXPECT_EQ(c.update(20), 128);
}

TEST(Curriculum, UpdateFollowsTheRootScheduleUntilMax) {
  const auto o = root_options(8, 64, 10, 8, 1);
  CurriculumScheduler c(o);
  // v = 8 + floor(56·s/10), rounded down to a multiple of 8.
  const std::vector<int64_t> want = {8, 8, 16, 24, 24, 32, 40, 40, 48, 56, 64, 64};
  for (int64_t s = 0; s < static_cast<int64_t>(want.size()); ++s) EXPECT_EQ(c.update(s), want[s]) << s;
  EXPECT_EQ(c.update(2), 64);  // frozen at max
  c.set_current(24);           // resume from a checkpoint taken below max
  EXPECT_EQ(c.update(2), 16);  // below max: recomputed from the step
}

TEST(Curriculum, BadOptionsNameTheKey) {
  auto expect_error = [](const CurriculumOptions& o, const std::string& key) {
    try {
      CurriculumScheduler c(o);
      ADD_FAILURE() << "no error for " << key;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  auto o = root_options(8, 64, 0, 8, 1);
  expect_error(o, "total_curriculum_step");
  o = root_options(8, 64, 10, 0, 1);
  expect_error(o, "difficulty_step");
  o = root_options(128, 64, 10, 8, 1);
  expect_error(o, "max_difficulty");
  o = root_options(8, 64, 10, 8, 0);
  expect_error(o, "root_degree");
  CurriculumOptions d;
  d.schedule_type = "fixed_discrete";
  d.difficulty = {8, 16};
  d.max_step = {5, 10};
  expect_error(d, "schedule_config.difficulty");
}

TEST(Curriculum, TruncatesTextBatchesToTheFirstPositions) {
  const auto input = at::arange(24, at::kLong).view({2, 12});
  Batch b{input, input + 1};
  const Batch t = truncate_to_seqlen(b, 5);
  ASSERT_EQ(t.input.sizes(), (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(t.input.is_contiguous());
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(t.input[r][j].item<int64_t>(), 12 * r + j);
      EXPECT_EQ(t.target[r][j].item<int64_t>(), 12 * r + j + 1);
    }
  }
  EXPECT_TRUE(truncate_to_seqlen(b, 12).input.equal(input));
  EXPECT_TRUE(truncate_to_seqlen(b, 64).input.equal(input));  // a length beyond T keeps the batch
  EXPECT_THROW(truncate_to_seqlen(Batch{at::zeros({2, 1, 4, 4}), at::zeros({2}, at::kLong)}, 2), UsageError);
  EXPECT_THROW(truncate_to_seqlen(b, 0), UsageError);
}

}  // namespace
}  // namespace xtrain::data::curriculum_test
