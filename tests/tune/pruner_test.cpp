// Median rule and ASHA decisions on scripted learning curves, against decisions worked out by
// hand from the published rules (Golovin et al. 2017; Li et al. 2018, as Optuna implements them).
#include "xtrain/tune/pruner.h"

#include <gtest/gtest.h>

namespace xtrain::tune::pruner_test {
namespace {

Trial curve(int64_t id, TrialState state, std::vector<std::pair<int64_t, double>> values) {
  Trial t;
  t.id = id;
  t.state = state;
  t.intermediate = std::move(values);
  return t;
}

// Three completed curves; medians are 6 at step 10 and 5 at step 20.
std::vector<Trial> completed_three(double sign) {
  std::vector<Trial> all;
  const double rows[3][3] = {{5, 4, 3}, {6, 5, 4}, {7, 6, 5}};
  for (int i = 0; i < 3; ++i)
    all.push_back(
        curve(i, TrialState::kComplete, {{10, sign * rows[i][0]}, {20, sign * rows[i][1]}, {30, sign * rows[i][2]}}));
  return all;
}

// Feeds `values` one by one; returns the step at which the pruner stopped the trial, or -1.
int64_t first_prune(Pruner& p, std::vector<Trial>& all, int64_t id,
                    const std::vector<std::pair<int64_t, double>>& values) {
  all.push_back(curve(id, TrialState::kRunning, {}));
  for (const auto& v : values) {
    all.back().intermediate.push_back(v);
    Trial copy = all.back();
    if (p.check(copy, all)) return v.first;
    all.back() = copy;
  }
  return -1;
}

TEST(MedianPruner, StopsTrialsWorseThanTheMedianAtTheSameStep) {
  for (double sign : {1.0, -1.0}) {  // maximising the negated curves gives the same decisions
    PrunerOptions o;
    o.startup_trials = 3;
    MedianPruner p(o, sign);
    auto all = completed_three(sign);
    EXPECT_EQ(first_prune(p, all, 3, {{10, sign * 6.5}}), 10) << "6.5 > median 6";
    all = completed_three(sign);
    EXPECT_EQ(first_prune(p, all, 3, {{10, sign * 5.5}, {20, sign * 5.2}}), 20) << "best 5.2 > median 5 at step 20";
    all = completed_three(sign);
    EXPECT_EQ(first_prune(p, all, 3, {{10, sign * 5.9}, {20, sign * 4.9}, {30, sign * 4.0}}), -1);
    all = completed_three(sign);
    EXPECT_EQ(first_prune(p, all, 3, {{15, sign * 100}}), -1) << "nobody reported at step 15";
    all = completed_three(sign);
    // The rule compares the best value so far (5.5, from step 10) with the step-20 median (5).
    EXPECT_EQ(first_prune(p, all, 3, {{10, sign * 5.5}, {20, sign * 7}}), 20);
  }
}

TEST(MedianPruner, WaitsForStartupTrialsAndWarmup) {
  PrunerOptions o;
  o.startup_trials = 4;
  MedianPruner p(o, 1.0);
  auto all = completed_three(1.0);
  EXPECT_EQ(first_prune(p, all, 3, {{10, 100}}), -1) << "only 3 completed trials";
  o.startup_trials = 3;
  o.warmup_steps = 20;
  MedianPruner warm(o, 1.0);
  all = completed_three(1.0);
  EXPECT_EQ(first_prune(warm, all, 3, {{10, 100}, {20, 100}}), 20) << "not before step 20";
  // Running and pruned trials do not count as completed.
  all = completed_three(1.0);
  all[2].state = TrialState::kPruned;
  MedianPruner strict(PrunerOptions{3, 0, 0, 3}, 1.0);
  EXPECT_EQ(first_prune(strict, all, 3, {{10, 100}}), -1);
}

TEST(MedianPruner, EvenCountAveragesTheMiddleTwo) {
  PrunerOptions o;
  o.startup_trials = 1;
  MedianPruner p(o, 1.0);
  std::vector<Trial> base;
  for (int i = 0; i < 4; ++i) base.push_back(curve(i, TrialState::kComplete, {{10, 5.0 + i}}));  // median 6.5
  auto all = base;
  EXPECT_EQ(first_prune(p, all, 4, {{10, 6.4}}), -1);
  all = base;
  EXPECT_EQ(first_prune(p, all, 4, {{10, 6.6}}), 10);
}

TEST(AshaPruner, KeepsTheTopThirdAtEachRung) {
  PrunerOptions o;
  o.min_resource = 10;
  o.reduction_factor = 3;
  AshaPruner p(o, 1.0);
  std::vector<Trial> all;
  // Rung 0 (step 10) values in arrival order, with the decision from the rule: the cut-off is the
  // (⌊n/3⌋ - 1)-th smallest value (at least the smallest) among the n values at the rung.
  const std::vector<std::pair<double, bool>> script = {
      {5.0, false},  // [5]: best
      {6.0, true},   // [5 6]: cut-off 5
      {4.0, false},  // [4 5 6]: cut-off 4
      {4.5, true},   // n = 4: cut-off 4
      {3.0, false},  // best
      {4.2, true},   // n = 6: cut-off = 2nd smallest = 4
      {3.9, false},  // n = 7: [3 3.9 4 ...], cut-off 3.9
  };
  for (size_t i = 0; i < script.size(); ++i) {
    all.push_back(curve(static_cast<int64_t>(i), TrialState::kRunning, {{10, script[i].first}}));
    const bool pruned = p.check(all.back(), all).has_value();
    EXPECT_EQ(pruned, script[i].second) << "trial " << i << " value " << script[i].first;
    ASSERT_EQ(all.back().rungs.size(), 1u);
    EXPECT_EQ(all.back().rungs[0], script[i].first);
    if (pruned) all.back().state = TrialState::kPruned;
  }
  // Rung 1 is at step 30: trial 0 reaches it first and is the only value there, so it continues.
  all[0].intermediate.push_back({20, 4.0});
  EXPECT_FALSE(p.check(all[0], all).has_value());
  EXPECT_EQ(all[0].rungs.size(), 1u) << "step 20 is below rung 1";
  all[0].intermediate.push_back({30, 2.5});
  EXPECT_FALSE(p.check(all[0], all).has_value());
  EXPECT_EQ(all[0].rungs.size(), 2u);
  all[2].intermediate.push_back({30, 2.6});
  EXPECT_TRUE(p.check(all[2], all).has_value()) << "[2.5 2.6]: cut-off 2.5";
}

TEST(AshaPruner, AutoMinResourceAndSkippedRungs) {
  PrunerOptions o;        // min_resource 0: the smallest step reported by any trial (here 50)
  AshaPruner p(o, -1.0);  // maximise accuracy
  std::vector<Trial> all = {curve(0, TrialState::kRunning, {{50, 0.8}})};
  EXPECT_FALSE(p.check(all[0], all).has_value());
  // A trial whose first report is at step 150 passes rungs 0 (50) and 1 (150) at once.
  all.push_back(curve(1, TrialState::kRunning, {{150, 0.9}}));
  EXPECT_FALSE(p.check(all[1], all).has_value()) << "0.9 beats 0.8 at rung 0 and is alone at rung 1";
  EXPECT_EQ(all[1].rungs, (std::vector<double>{-0.9, -0.9}));
  all.push_back(curve(2, TrialState::kRunning, {{60, 0.7}}));
  EXPECT_TRUE(p.check(all[2], all).has_value()) << "accuracy 0.7 below the best 0.9 at rung 0";
}

TEST(Pruner, FactoryNamesAndErrors) {
  EXPECT_EQ(make_pruner("none", {}, 1.0), nullptr);
  EXPECT_EQ(make_pruner("asha", {}, 1.0)->name(), "asha");
  EXPECT_EQ(make_pruner("median", {}, 1.0)->name(), "median");
  try {
    make_pruner("ashaa", {}, 1.0);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'asha'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::tune::pruner_test
