// Samplers: reproducibility, valid proposals on mixed spaces, pending points and failed trials,
// and GP-EI against random search on functions with known minima (5 seeds × 50 evaluations here,
// looser bounds than the issue's goals; bench/tune_bench.cpp has the full 10-seed figures).
#include "xtrain/tune/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "support/tune_test_functions.h"

namespace xtrain::tune::sampler_test {
namespace {

TEST(Sampler, RandomIsReproducibleAndValid) {
  const auto space = SearchSpace::parse(R"({"a": {"type": "int", "low": 1, "high": 9, "log": true},
                                            "b": {"type": "choice", "values": ["x", "y", "z"]}})");
  RandomSampler s(space);
  Rng r1(5, 3), r2(5, 3), r3(5, 4);
  const auto x1 = s.propose({}, {}, r1);
  EXPECT_EQ(x1, s.propose({}, {}, r2));
  EXPECT_NE(x1, s.propose({}, {}, r3));
  EXPECT_EQ(space.snap(x1), x1);
}

// A mixed space (log-float, int, choice) with a known best: lr = 1e-3, warmup = 40, type "b".
double mixed_objective(const Params& p) {
  return std::pow(std::log10(p["lr"].get<double>()) + 3, 2) + std::pow((p["warmup"].get<double>() - 40) / 100, 2) +
         (p["type"] == "b" ? 0.0 : 1.0);
}

TEST(Sampler, GpHandlesMixedSpacesFailuresAndPendingPoints) {
  const auto space = SearchSpace::parse(R"({"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-1},
    "warmup": {"type": "int", "low": 0, "high": 200}, "type": {"type": "choice", "values": ["a", "b", "c"]}})");
  GpSampler s(space);
  std::vector<Observation> done;
  for (int64_t i = 0; i < 25; ++i) {
    Rng rng(1, static_cast<uint64_t>(i));
    const auto x = s.propose(done, {}, rng);
    ASSERT_EQ(space.snap(x), x) << "proposals are valid points";
    for (const auto& o : done) ASSERT_NE(o.x, x) << "no point is proposed twice";
    const auto p = space.decode(x);
    // lr above 1e-2 "crashes": a NaN the sampler must treat as the worst value.
    done.push_back({x, p["lr"].get<double>() > 1e-2 ? NAN : mixed_objective(p)});
  }
  double best = INFINITY;
  for (const auto& o : done)
    if (std::isfinite(o.value)) best = std::min(best, o.value);
  EXPECT_LT(best, 0.1) << "the GP finds type b and lr within ~2x of 1e-3 in 25 evaluations";
  // Kriging believer: with the last proposal pending, the next proposal is a different point.
  Rng r1(1, 100), r2(1, 100);
  const auto first = s.propose(done, {}, r1);
  const auto second = s.propose(done, {first}, r2);
  EXPECT_NE(first, second);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Goal {
  TestFunction fn;
  double bound_at_50;  // loose: the issue's goal (median over ≥ 10 seeds) is in the comment
};

TEST(Sampler, GpBeatsRandomOnTestFunctions) {
  const std::vector<Goal> goals = {
      {branin(), 1e-2},       // goal 1e-3
      {hartmann6(), 0.2},     // goal 0.05
      {rosenbrock(2), 0.1},   // goal 0.02
      {rosenbrock(4), 40.0},  // goal 15
  };
  const int seeds = 5;
  for (const auto& g : goals) {
    std::vector<double> gp[3], rnd[3];  // regret after 20, 30, 50 evaluations
    for (int seed = 0; seed < seeds; ++seed) {
      const auto a = regret_curve(g.fn, "gp", 50, seed), b = regret_curve(g.fn, "random", 50, seed);
      for (int k = 0; k < 3; ++k) {
        const int at = (k == 0 ? 20 : k == 1 ? 30 : 50) - 1;
        gp[k].push_back(a[at]);
        rnd[k].push_back(b[at]);
      }
    }
    for (int k = 0; k < 3; ++k) {
      EXPECT_LT(median(gp[k]), median(rnd[k])) << g.fn.name << " at " << (k == 0 ? 20 : k == 1 ? 30 : 50);
    }
    EXPECT_LE(median(gp[2]), g.bound_at_50) << g.fn.name << ": median regret after 50 evaluations";
  }
}

}  // namespace
}  // namespace xtrain::tune::sampler_test
