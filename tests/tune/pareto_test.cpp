// The Pareto front: a hand-worked case (dominated points, exact duplicates, a tie on one
// objective, a NaN), random integer point sets against an independent sweep (sort by the first
// objective, keep each point that lowers the running minimum of the second), the front over
// trials (complete only, --mode max) and the files a two-objective study writes.
#include "xtrain/tune/pareto.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "support/paths.h"
#include "xtrain/base/file_io.h"
#include "xtrain/tune/rng.h"

namespace xtrain::tune::pareto_test {
namespace {

TEST(Pareto, HandWorkedFront) {
  //                                             A       B       C       D       E (=B)  F       G
  const std::vector<std::pair<double, double>> p = {{1, 5}, {2, 3}, {3, 4}, {4, 1}, {2, 3}, {5, 1}, {NAN, 0}};
  // C is dominated by B (2 <= 3, 3 < 4); F by D (4 < 5, equal second); G has no value; B and E tie
  // exactly (neither dominates). Ordered by the second objective: D, B, E, A.
  EXPECT_EQ(pareto_front(p), (std::vector<size_t>{3, 1, 4, 0}));
  EXPECT_TRUE(pareto_front({}).empty());
  EXPECT_EQ(pareto_front({{7, 7}}), (std::vector<size_t>{0}));
}

// 2-D non-dominated set by a sweep over the points sorted by (first, second).
std::vector<size_t> sweep_front(const std::vector<std::pair<double, double>>& p) {
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<size_t> out;
  double best_second = INFINITY;
  std::pair<double, double> last_kept = {NAN, NAN};
  for (size_t i : order) {
    if (p[i].second < best_second || p[i] == last_kept) {
      out.push_back(i);
      best_second = p[i].second;
      last_kept = p[i];
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Pareto, MatchesASweepOnRandomPointSets) {
  Rng rng(9);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::pair<double, double>> p;
    const int64_t n = 1 + rng.integer(30);
    for (int64_t i = 0; i < n; ++i)
      p.emplace_back(static_cast<double>(rng.integer(8)), static_cast<double>(rng.integer(8)));  // many ties
    auto front = pareto_front(p);
    for (size_t k = 1; k < front.size(); ++k) {
      EXPECT_LE(p[front[k - 1]].second, p[front[k]].second) << "ordered by the second objective";
      EXPECT_GE(p[front[k - 1]].first, p[front[k]].first) << "so the first falls along the front";
    }
    std::sort(front.begin(), front.end());
    ASSERT_EQ(front, sweep_front(p)) << "round " << round;
  }
}

Trial trial(int64_t id, TrialState state, double value, std::optional<double> o2) {
  Trial t;
  t.id = id;
  t.state = state;
  t.value = value;
  t.objective2 = o2;
  t.params = {{"n", id}};
  t.intermediate = {{10 * (id + 1), value}};
  return t;
}

TEST(Pareto, OverTrialsCountsCompleteOnesOnly) {
  const std::vector<Trial> trials = {
      trial(0, TrialState::kComplete, 2.0, 100),  // on the front when minimising
      trial(1, TrialState::kComplete, 1.5, 300),  // on the front in both modes (max: dominated? no, see below)
      trial(2, TrialState::kPruned, 0.1, 50),     // pruned: never on the front
      trial(3, TrialState::kComplete, 1.0, 900),  // lowest value
      trial(4, TrialState::kComplete, 3.0, 100),  // max mode: the highest value at the lowest cost
      trial(5, TrialState::kComplete, 0.5, std::nullopt)};  // no second objective measured
  EXPECT_EQ(pareto_trials(trials, +1.0), (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(pareto_trials(trials, -1.0), (std::vector<size_t>{4}));  // 3.0 at cost 100 beats all
}

TEST(Pareto, WritesTheFrontAndItsPlot) {
  const auto dir = testing::temp_dir("pareto-out");
  const auto space = SearchSpace::parse(R"({"n": {"type": "int", "low": 0, "high": 9}})");
  const std::vector<Trial> trials = {trial(0, TrialState::kComplete, 2.0, 100),
                                     trial(1, TrialState::kComplete, 1.5, 300),
                                     trial(2, TrialState::kComplete, 2.5, 400)};
  const auto written = write_pareto_outputs(dir, space, trials, 1.0, "val_loss", "params");
  ASSERT_EQ(written.size(), 2u);
  const auto j = nlohmann::json::parse(read_file(dir + "/pareto.json"));
  ASSERT_EQ(j["front"].size(), 2u);
  EXPECT_EQ(j["front"][0]["trial"], 0);
  EXPECT_EQ(j["front"][1]["trial"], 1);
  EXPECT_EQ(j["front"][1]["objective2"], 300.0);
  EXPECT_EQ(j["front"][1]["steps"], 20);
  EXPECT_EQ(j["front"][1]["overrides"][0], "n=1");
  EXPECT_EQ(read_file(dir + "/pareto.png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const auto table = pareto_table(trials, pareto_trials(trials, 1.0), space, "val_loss", "params");
  EXPECT_NE(table.find("0001  1.5        300"), std::string::npos) << table;
}

}  // namespace
}  // namespace xtrain::tune::pareto_test
