// Minimisation of a smooth function over a box with L-BFGS directions (Nocedal & Wright, alg. 7.4)
// and a projected backtracking (Armijo) line search. Variables held at a bound by the gradient are
// frozen for the step; this is the simple "projected L-BFGS", not full L-BFGS-B, which is enough
// for the GP's few hyperparameters and for refining the acquisition inside the unit cube.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace xtrain::tune {

// f(x) and, when grad != nullptr, its gradient. Non-finite values are treated as "too far".
using Objective = std::function<double(const std::vector<double>& x, std::vector<double>* grad)>;

struct LbfgsOptions {
  int64_t max_iterations = 100;
  int64_t memory = 8;           // stored (s, y) pairs
  double gradient_tol = 1e-6;   // stop when the projected gradient's largest entry is below this
  double relative_tol = 1e-10;  // stop when f improves by less than this fraction
};

struct LbfgsResult {
  std::vector<double> x;
  double f = 0.0;
  int64_t iterations = 0;
  int64_t evaluations = 0;
};

LbfgsResult minimize_box(const Objective& f, std::vector<double> x0, const std::vector<double>& lower,
                         const std::vector<double>& upper, const LbfgsOptions& options = {});

}  // namespace xtrain::tune
