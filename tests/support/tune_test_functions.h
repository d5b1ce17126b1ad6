// Standard optimisation test functions with known minima (Surjanovic & Bingham, "Virtual Library
// of Simulation Experiments"), and an ask/tell loop that runs a sampler on one, for
// tests/tune/sampler_test.cpp and bench/tune_bench.cpp (both compile this folder's .cpp; it is not
// part of the library): Branin on [-5,10]×[0,15], Hartmann6 on [0,1]⁶, Rosenbrock on De Jong's
// [-2.048, 2.048]^d.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace xtrain::tune {

struct TestFunction {
  std::string name;
  std::vector<double> low, high;
  double minimum = 0.0;
  std::function<double(const std::vector<double>&)> f;
};

TestFunction branin();
TestFunction hartmann6();
TestFunction rosenbrock(int64_t dims);

// `evaluations` proposals of sampler "gp" or "random" (seeded), one at a time; returns the regret
// (best value so far - minimum) after each evaluation.
std::vector<double> regret_curve(const TestFunction& fn, const std::string& sampler, int64_t evaluations,
                                 uint64_t seed);

}  // namespace xtrain::tune
