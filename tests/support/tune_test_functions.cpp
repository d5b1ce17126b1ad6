// The test functions' formulas and constants, as published; the ask/tell loop they run under.
#include "support/tune_test_functions.h"

#include <cmath>
#include <limits>

#include "xtrain/tune/sampler.h"

namespace xtrain::tune {

TestFunction branin() {
  TestFunction t;
  t.name = "branin";
  t.low = {-5.0, 0.0};
  t.high = {10.0, 15.0};
  t.minimum = 0.397887357729738;  // at (-π, 12.275), (π, 2.275), (9.42478, 2.475)
  t.f = [](const std::vector<double>& x) {
    const double b = 5.1 / (4.0 * M_PI * M_PI), c = 5.0 / M_PI, r = 6.0, s = 10.0, tt = 1.0 / (8.0 * M_PI);
    const double u = x[1] - b * x[0] * x[0] + c * x[0] - r;
    return u * u + s * (1.0 - tt) * std::cos(x[0]) + s;
  };
  return t;
}

TestFunction hartmann6() {
  TestFunction t;
  t.name = "hartmann6";
  t.low.assign(6, 0.0);
  t.high.assign(6, 1.0);
  t.minimum = -3.32236801141551;  // at (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)
  t.f = [](const std::vector<double>& x) {
    static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
    static const double a[4][6] = {
        {10, 3, 17, 3.5, 1.7, 8},
        {0.05, 10, 17, 0.1, 8, 14},
        {3, 3.5, 1.7, 10, 17, 8},
        {17, 8, 0.05, 10, 0.1, 14},
    };
    static const double p[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                   {2329, 4135, 8307, 3736, 1004, 9991},
                                   {2348, 1451, 3522, 2883, 3047, 6650},
                                   {4047, 8828, 8732, 5743, 1091, 381}};
    double sum = 0.0;
    for (int i = 0; i < 4; ++i) {
      double inner = 0.0;
      for (int j = 0; j < 6; ++j) inner += a[i][j] * std::pow(x[j] - 1e-4 * p[i][j], 2);
      sum += alpha[i] * std::exp(-inner);
    }
    return -sum;
  };
  return t;
}

TestFunction rosenbrock(int64_t dims) {
  TestFunction t;
  t.name = "rosenbrock" + std::to_string(dims) + "d";
  t.low.assign(static_cast<size_t>(dims), -2.048);  // De Jong's classic domain (F2)
  t.high.assign(static_cast<size_t>(dims), 2.048);
  t.minimum = 0.0;  // at (1, ..., 1)
  t.f = [](const std::vector<double>& x) {
    double s = 0.0;
    for (size_t i = 0; i + 1 < x.size(); ++i)
      s += 100.0 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1.0 - x[i], 2);
    return s;
  };
  return t;
}

std::vector<double> regret_curve(const TestFunction& fn, const std::string& sampler, int64_t evaluations,
                                 uint64_t seed) {
  const auto space = SearchSpace::box(fn.low, fn.high);
  auto s = make_sampler(sampler, space);
  std::vector<Observation> done;
  std::vector<double> regret;
  double best = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < evaluations; ++i) {
    Rng rng(seed, static_cast<uint64_t>(i));
    auto x = s->propose(done, {}, rng);
    const auto params = space.decode(x);
    std::vector<double> point;
    for (const auto& p : space.params()) point.push_back(params.at(p.key).get<double>());
    const double value = fn.f(point);
    done.push_back({x, value});
    best = std::min(best, value);
    regret.push_back(best - fn.minimum);
  }
  return regret;
}

}  // namespace xtrain::tune
