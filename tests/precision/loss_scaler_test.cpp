// The dynamic loss scaler as tables of (overflow pattern -> scale, hysteresis left, skipped),
// each worked out by hand from DeepSpeed's DynamicLossScaler rules (reference/deepspeed.md §a.4):
// growth when (iter - last_overflow_iter) % window == 0, hysteresis decrements before halving,
// refill on growth (or on every clean step with consecutive_hysteresis), abort at the minimum.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/precision/loss_scaler.h"

namespace xtrain::precision::loss_scaler_test {
namespace {

struct Expect {
  double scale;
  int64_t hysteresis;
  bool skipped;
};

Fp16Options options(int power, int64_t window, int64_t hysteresis, bool consecutive = false, double min_scale = 1) {
  Fp16Options o;
  o.enabled = true;
  o.initial_scale_power = power;
  o.loss_scale_window = window;
  o.hysteresis = hysteresis;
  o.consecutive_hysteresis = consecutive;
  o.min_loss_scale = min_scale;
  return o;
}

void run_table(LossScaler& s, const std::vector<bool>& overflow, const std::vector<Expect>& expect) {
  ASSERT_EQ(overflow.size(), expect.size());
  for (size_t i = 0; i < overflow.size(); ++i) {
    const auto r = s.update(overflow[i]);
    EXPECT_EQ(s.scale(), expect[i].scale) << "update " << i;
    EXPECT_EQ(s.hysteresis_left(), expect[i].hysteresis) << "update " << i;
    EXPECT_EQ(r.skipped, expect[i].skipped) << "update " << i;
  }
}

TEST(LossScaler, WindowDoublingWithoutOverflow) {
  // last_overflow_iter starts at -1: the first doubling is on the window-th update (iter 2).
  LossScaler s(options(0, 3, 1));
  run_table(s, {false, false, false, false, false, false, false},
            {{1, 1, false}, {1, 1, false}, {2, 1, false}, {2, 1, false}, {2, 1, false}, {4, 1, false}, {4, 1, false}});
}

TEST(LossScaler, NoHysteresisHalvesOnEveryOverflow) {
  LossScaler s(options(4, 2, 1));
  run_table(s, {false, false, false, true, false, false, true, true, true, true},
            {{16, 1, false}, {32, 1, false}, {32, 1, false}, {16, 1, true}, {16, 1, false},
             {32, 1, false}, {16, 1, true}, {8, 1, true}, {4, 1, true}, {2, 1, true}});
}

TEST(LossScaler, HysteresisDelaysHalvingAndRefillsOnGrowth) {
  LossScaler s(options(3, 3, 2));
  run_table(s, {true, true, false, false, false, true, false, true, true},
            {{8, 1, true}, {4, 1, true}, {4, 1, false}, {4, 1, false}, {8, 2, false},
             {8, 1, true}, {8, 1, false}, {4, 1, true}, {2, 1, true}});
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryCleanStep) {
  LossScaler consecutive(options(3, 100, 2, /*consecutive=*/true));
  run_table(consecutive, {true, false, true, true}, {{8, 1, true}, {8, 2, false}, {8, 1, true}, {4, 1, true}});
  LossScaler plain(options(3, 100, 2, /*consecutive=*/false));
  run_table(plain, {true, false, true, true}, {{8, 1, true}, {8, 1, false}, {4, 1, true}, {2, 1, true}});
}

TEST(LossScaler, StopsAtMinimumWithAdvice) {
  LossScaler s(options(2, 1000, 1, false, /*min_scale=*/2));
  EXPECT_TRUE(s.update(true).skipped);
  EXPECT_EQ(s.scale(), 2);
  try {
    s.update(true);
    FAIL() << "expected a UsageError at the minimum scale";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("minimum loss scale (2)"), std::string::npos) << m;
    EXPECT_NE(m.find("bf16"), std::string::npos) << m;
    EXPECT_NE(m.find("min_loss_scale"), std::string::npos) << m;
  }
}

TEST(LossScaler, StaticScaleSkipsButNeverChanges) {
  Fp16Options o = options(16, 2, 2);
  o.loss_scale = 128;
  LossScaler s(o);
  EXPECT_FALSE(s.dynamic());
  run_table(s, {false, true, false, false, false}, {{128, 2, false}, {128, 2, true}, {128, 2, false}, {128, 2, false},
                                                    {128, 2, false}});
}

TEST(LossScaler, DisabledIsIdentity) {
  LossScaler s(Fp16Options{});
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_FALSE(s.update(true).skipped);
}

TEST(LossScaler, StateRoundTrips) {
  LossScaler a(options(3, 3, 2));
  for (bool o : {true, false, false, true}) a.update(o);
  LossScaler b(options(3, 3, 2));
  b.load_state_json(a.state_json());
  for (bool o : {false, false, true, false, false, false, true, true}) {
    a.update(o);
    b.update(o);
    EXPECT_EQ(a.scale(), b.scale());
    EXPECT_EQ(a.hysteresis_left(), b.hysteresis_left());
  }
}

TEST(LossScaler, BadOptionsNameTheKey) {
  Fp16Options o = options(16, 0, 2);
  try {
    LossScaler s(o);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("fp16.loss_scale_window"), std::string::npos);
  }
}

}  // namespace
}  // namespace xtrain::precision::loss_scaler_test
