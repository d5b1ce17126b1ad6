// Projected L-BFGS: two-loop recursion on the free variables, backtracking along the projected
// path, memory reset whenever the direction stops being a descent direction.
#include "xtrain/tune/lbfgs.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <deque>

namespace xtrain::tune {
namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Variables at a bound whose gradient pushes outwards: they stay put this step.
std::vector<bool> free_mask(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& lo,
                            const std::vector<double>& hi) {
  std::vector<bool> free(x.size(), true);
  for (size_t i = 0; i < x.size(); ++i) {
    if ((x[i] <= lo[i] && g[i] > 0) || (x[i] >= hi[i] && g[i] < 0)) free[i] = false;
  }
  return free;
}

struct Pair {
  std::vector<double> s, y;
  double rho;
};

// d = -H g on the free variables (two-loop recursion), zero on the frozen ones.
std::vector<double> direction(const std::vector<double>& g, const std::deque<Pair>& pairs,
                              const std::vector<bool>& free) {
  std::vector<double> q(g.size());
  for (size_t i = 0; i < g.size(); ++i) q[i] = free[i] ? g[i] : 0.0;
  std::vector<double> alpha(pairs.size());
  for (size_t k = pairs.size(); k-- > 0;) {
    alpha[k] = pairs[k].rho * dot(pairs[k].s, q);
    for (size_t i = 0; i < q.size(); ++i) q[i] -= alpha[k] * pairs[k].y[i];
  }
  if (!pairs.empty()) {
    const auto& last = pairs.back();
    const double gamma = dot(last.s, last.y) / dot(last.y, last.y);
    for (auto& v : q) v *= gamma;
  }
  for (size_t k = 0; k < pairs.size(); ++k) {
    const double beta = pairs[k].rho * dot(pairs[k].y, q);
    for (size_t i = 0; i < q.size(); ++i) q[i] += (alpha[k] - beta) * pairs[k].s[i];
  }
  for (size_t i = 0; i < q.size(); ++i) q[i] = free[i] ? -q[i] : 0.0;
  return q;
}

}  // namespace

LbfgsResult minimize_box(const Objective& f, std::vector<double> x0, const std::vector<double>& lower,
                         const std::vector<double>& upper, const LbfgsOptions& options) {
  const size_t n = x0.size();
  TORCH_INTERNAL_ASSERT(lower.size() == n && upper.size() == n, "minimize_box: bounds do not match x0");
  auto project = [&](std::vector<double>& x) {
    for (size_t i = 0; i < n; ++i) x[i] = std::min(upper[i], std::max(lower[i], x[i]));
  };
  LbfgsResult r;
  project(x0);
  r.x = x0;
  std::vector<double> g(n), g_new(n), x_new(n);
  r.f = f(r.x, &g);
  r.evaluations = 1;
  if (!std::isfinite(r.f)) return r;
  std::deque<Pair> pairs;
  for (r.iterations = 0; r.iterations < options.max_iterations; ++r.iterations) {
    const auto free = free_mask(r.x, g, lower, upper);
    double pg_max = 0.0;
    for (size_t i = 0; i < n; ++i) pg_max = std::max(pg_max, free[i] ? std::abs(g[i]) : 0.0);
    if (pg_max < options.gradient_tol) break;
    std::vector<double> d = direction(g, pairs, free);
    if (dot(d, g) >= 0.0) {  // not a descent direction: forget the curvature pairs
      pairs.clear();
      d = direction(g, pairs, free);
    }
    double t = pairs.empty() ? std::min(1.0, 1.0 / pg_max) : 1.0;
    double f_new = 0.0;
    bool accepted = false;
    for (int k = 0; k < 40 && !accepted; ++k, t *= 0.5) {
      for (size_t i = 0; i < n; ++i) x_new[i] = r.x[i] + t * d[i];
      project(x_new);
      f_new = f(x_new, &g_new);
      ++r.evaluations;
      double decrease = 0.0;  // g · (x_new - x): the first-order change along the projected step
      for (size_t i = 0; i < n; ++i) decrease += g[i] * (x_new[i] - r.x[i]);
      accepted = std::isfinite(f_new) && f_new <= r.f + 1e-4 * decrease && decrease < 0.0;
    }
    if (!accepted) {
      if (pairs.empty()) break;  // even steepest descent cannot improve: done
      pairs.clear();
      continue;
    }
    Pair p{std::vector<double>(n), std::vector<double>(n), 0.0};
    for (size_t i = 0; i < n; ++i) {
      p.s[i] = x_new[i] - r.x[i];
      p.y[i] = g_new[i] - g[i];
    }
    const double sy = dot(p.s, p.y);
    if (sy > 1e-12 * std::sqrt(dot(p.s, p.s) * dot(p.y, p.y))) {
      p.rho = 1.0 / sy;
      pairs.push_back(std::move(p));
      if (static_cast<int64_t>(pairs.size()) > options.memory) pairs.pop_front();
    }
    const double improvement = r.f - f_new;
    r.x = x_new;
    r.f = f_new;
    g = g_new;
    if (improvement <= options.relative_tol * std::max(1.0, std::abs(r.f))) break;
  }
  return r;
}

}  // namespace xtrain::tune
