// Benchmark (not a test): GP-EI Bayesian optimisation against random search (the peer) on test
// functions with known minima — Branin, Hartmann6, Rosenbrock 2-D and 4-D on [-2.048, 2.048]^d —
// as the median over seeds of the final regret after 20, 30 and 50 evaluations, with the issue's
// goals; then the time of one GP proposal (fit + acquisition) at 50/100/200 observations in 6
// dimensions. Checks first that each function gives its published minimum at its minimiser.
//   bench_tune_bench [--seeds 10] [--evals 50]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "xtrain/tune/sampler.h"
#include "support/tune_test_functions.h"

namespace {

using namespace xtrain::tune;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// f(x*) = published minimum, to the precision the minimisers are published with.
bool minima_check() {
  struct Case {
    TestFunction fn;
    std::vector<double> x;
    double tol;
  };
  const std::vector<Case> cases = {
      {branin(), {-M_PI, 12.275}, 1e-9},
      {branin(), {M_PI, 2.275}, 1e-9},
      {hartmann6(), {0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573}, 1e-5},  // x* given to ~6 digits
      {rosenbrock(2), {1, 1}, 0},
      {rosenbrock(4), {1, 1, 1, 1}, 0},
  };
  bool ok = true;
  for (const auto& c : cases) {
    const double v = c.fn.f(c.x);
    const bool good = std::abs(v - c.fn.minimum) <= c.tol;
    std::printf("check %-13s f(x*) = %.10f  published %.10f  %s\n", c.fn.name.c_str(), v, c.fn.minimum,
                good ? "ok" : "MISMATCH");
    ok = ok && good;
  }
  return ok;
}

void regret_table(int seeds, int evals) {
  struct Goal {
    TestFunction fn;
    double goal;
  };
  const std::vector<Goal> goals = {{branin(), 1e-3}, {hartmann6(), 0.05}, {rosenbrock(2), 0.02}, {rosenbrock(4), 15.0}};
  const int at[3] = {20, 30, evals};
  std::printf("\nmedian regret over %d seeds (GP-EI | random), goal for GP-EI at %d evaluations\n\n", seeds, evals);
  std::printf(
      "| function | @%d GP-EI | @%d random | @%d GP-EI | @%d random | @%d GP-EI | @%d random | goal | met | GP better "
      "at all | GP s/run |\n",
      at[0], at[0], at[1], at[1], at[2], at[2]);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& g : goals) {
    std::vector<double> gp[3], rnd[3];
    double gp_seconds = 0.0;
    for (int seed = 0; seed < seeds; ++seed) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto a = regret_curve(g.fn, "gp", evals, static_cast<uint64_t>(seed));
      gp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto b = regret_curve(g.fn, "random", evals, static_cast<uint64_t>(seed));
      for (int k = 0; k < 3; ++k) {
        gp[k].push_back(a[static_cast<size_t>(at[k] - 1)]);
        rnd[k].push_back(b[static_cast<size_t>(at[k] - 1)]);
      }
    }
    bool better = true;
    for (int k = 0; k < 3; ++k) better = better && median(gp[k]) < median(rnd[k]);
    std::printf("| %s | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %g | %s | %s | %.2f |\n", g.fn.name.c_str(),
                median(gp[0]), median(rnd[0]), median(gp[1]), median(rnd[1]), median(gp[2]), median(rnd[2]), g.goal,
                median(gp[2]) <= g.goal ? "yes" : "NO", better ? "yes" : "NO", gp_seconds / seeds);
    std::fflush(stdout);
  }
}

void proposal_times() {
  const auto fn = hartmann6();
  const auto space = SearchSpace::box(fn.low, fn.high);
  std::printf(
      "\none GP-EI proposal (hyperparameter fit with 4 starts + 2000 random and 500 local candidates + 5\n"
      "L-BFGS refinements), 6 dimensions, one thread, median of 5 (wall and CPU time: the wall\n"
      "time includes waiting for a core on a shared machine)\n\n| observations | wall s | CPU s |\n|---|---|---|\n");
  for (int n : {50, 100, 200}) {
    Rng rng(1);
    std::vector<Observation> obs;
    for (int i = 0; i < n; ++i) {
      auto x = space.encode(space.sample(rng));
      obs.push_back({x, fn.f(x)});
    }
    GpSampler sampler(space);
    std::vector<double> wall, cpu;
    for (int k = 0; k < 5; ++k) {
      Rng r(2, static_cast<uint64_t>(k));
      const auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      sampler.propose(obs, {}, r);
      cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("| %d | %.3f | %.3f |\n", n, median(wall), median(cpu));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 10, evals = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seeds")) seeds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--evals")) evals = std::atoi(argv[i + 1]);
  }
  if (seeds < 1 || evals < 30) {
    std::fprintf(stderr, "usage: bench_tune_bench [--seeds N>=1] [--evals N>=30]\n");
    return 2;
  }
  if (!minima_check()) return 1;
  regret_table(seeds, evals);
  proposal_times();
  return 0;
}
