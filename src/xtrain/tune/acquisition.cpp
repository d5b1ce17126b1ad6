// Candidate generation and local refinement for the acquisition. Local candidates perturb the
// best observed points at three scales (0.1, 0.02, 0.004 of the unit cube): fine convergence near
// an optimum needs candidates there, which uniform sampling in several dimensions rarely gives.
// Candidates that break a constraint of the space (after snapping) score -inf and are never chosen.
#include "xtrain/tune/acquisition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "xtrain/tune/lbfgs.h"
#include "xtrain/tune/log_ei.h"

namespace xtrain::tune {
namespace {

bool same_point(const std::vector<double>& a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-9) return false;
  return true;
}

std::vector<double> perturb(const std::vector<double>& anchor, const SearchSpace& space, double scale, Rng& rng) {
  std::vector<double> x = anchor;
  const double switch_prob = 1.0 / (1.0 + static_cast<double>(space.params().size()));
  for (const auto& p : space.params()) {
    if (p.type == ParamType::kChoice) {
      if (rng.uniform() < switch_prob) {
        for (int64_t c = 0; c < p.width(); ++c) x[p.offset + c] = 0.0;
        x[p.offset + rng.integer(p.width())] = 1.0;
      }
    } else {
      x[p.offset] = std::min(1.0, std::max(0.0, x[p.offset] + scale * rng.normal()));
    }
  }
  return space.snap(x);
}

struct Scored {
  std::vector<double> x;
  double value;
};

// L-BFGS on -log EI over the continuous coordinates, starting at `start`; returns the snapped point.
std::vector<double> refine(const GaussianProcess& gp, double best, const SearchSpace& space,
                           const std::vector<double>& start, int64_t iterations) {
  const auto mask = space.continuous_mask();
  std::vector<int64_t> free;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) free.push_back(static_cast<int64_t>(i));
  if (free.empty()) return start;
  std::vector<double> full = start, grad(start.size());
  const Objective f = [&](const std::vector<double>& z, std::vector<double>* g) {
    for (size_t k = 0; k < free.size(); ++k) full[free[k]] = z[k];
    const double v = gp_log_ei(gp, full.data(), best, g ? grad.data() : nullptr);
    if (g) {
      g->resize(free.size());
      for (size_t k = 0; k < free.size(); ++k) (*g)[k] = -grad[free[k]];
    }
    return std::isfinite(v) ? -v : std::numeric_limits<double>::infinity();
  };
  std::vector<double> z0;
  for (auto i : free) z0.push_back(start[i]);
  LbfgsOptions lo;
  lo.max_iterations = iterations;
  lo.gradient_tol = 1e-7;
  const auto r = minimize_box(f, z0, std::vector<double>(free.size(), 0.0), std::vector<double>(free.size(), 1.0), lo);
  std::vector<double> out = start;
  for (size_t k = 0; k < free.size(); ++k) out[free[k]] = r.x[k];
  return space.snap(out);
}

}  // namespace

double gp_log_ei(const GaussianProcess& gp, const double* x, double best, double* grad) {
  double mean = 0.0, var = 0.0;
  if (grad == nullptr) {
    gp.predict(x, &mean, &var);
    return log_expected_improvement(mean, var, best);
  }
  std::vector<double> dmean(static_cast<size_t>(gp.dims())), dvar(dmean.size());
  gp.predict(x, &mean, &var, dmean.data(), dvar.data());
  double dm = 0.0, dv = 0.0;
  const double value = log_expected_improvement(mean, var, best, &dm, &dv);
  for (size_t d = 0; d < dmean.size(); ++d) grad[d] = dm * dmean[d] + dv * dvar[d];
  return value;
}

std::vector<double> maximize_log_ei(const GaussianProcess& gp, double best, const SearchSpace& space,
                                    const std::vector<std::vector<double>>& anchors,
                                    const std::vector<std::vector<double>>& avoid, const AcquisitionOptions& options,
                                    Rng& rng) {
  std::vector<Scored> pool;
  auto add = [&](std::vector<double> x) {
    if (!space.feasible_point(x)) return;
    const double v = gp_log_ei(gp, x.data(), best);
    pool.push_back({std::move(x), std::isfinite(v) ? v : -std::numeric_limits<double>::infinity()});
  };
  for (int64_t i = 0; i < options.candidates; ++i) add(space.encode(space.sample(rng)));
  const double scales[] = {0.1, 0.02, 0.004};
  for (int64_t i = 0; !anchors.empty() && i < options.local_candidates; ++i) {
    add(perturb(anchors[static_cast<size_t>(i) % anchors.size()], space, scales[i % 3], rng));
  }
  std::sort(pool.begin(), pool.end(), [](const Scored& a, const Scored& b) { return a.value > b.value; });
  std::vector<std::vector<double>> starts;
  for (const auto& s : pool) {
    if (static_cast<int64_t>(starts.size()) >= options.local_starts) break;
    bool seen = false;
    for (const auto& t : starts) seen = seen || same_point(t, s.x);
    if (!seen) starts.push_back(s.x);
  }
  for (const auto& s : starts) add(refine(gp, best, space, s, options.refine_iterations));
  std::stable_sort(pool.begin(), pool.end(), [](const Scored& a, const Scored& b) { return a.value > b.value; });
  for (const auto& s : pool) {
    bool taken = false;
    for (const auto& a : avoid) taken = taken || same_point(a, s.x);
    if (!taken) return s.x;
  }
  return space.encode(space.sample(rng));  // every candidate was already evaluated
}

}  // namespace xtrain::tune
