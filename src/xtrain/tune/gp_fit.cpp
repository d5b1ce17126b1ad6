// Multi-start MAP fit of θ with the projected L-BFGS of lbfgs.h on the analytic gradient.
#include "xtrain/tune/gp_fit.h"

#include <cmath>
#include <limits>

#include "xtrain/tune/gp.h"
#include "xtrain/tune/lbfgs.h"

namespace xtrain::tune {
namespace {

// Gamma(a, b) on p = e^θ, as a function of θ: (a - 1) θ - b e^θ.
double gamma_log_density(double theta, double a, double b, double* dtheta) {
  const double p = std::exp(theta);
  *dtheta = (a - 1.0) - b * p;
  return (a - 1.0) * theta - b * p;
}

}  // namespace

double log_prior(const std::vector<double>& theta, int64_t dims, std::vector<double>* grad) {
  if (grad) grad->assign(theta.size(), 0.0);
  double lp = 0.0, d = 0.0;
  for (int64_t i = 0; i < dims; ++i) {
    lp += gamma_log_density(theta[i], 3.0, 6.0, &d);
    if (grad) (*grad)[i] = d;
  }
  lp += gamma_log_density(theta[signal_index(dims)], 2.0, 0.15, &d);
  if (grad) (*grad)[signal_index(dims)] = d;
  lp += gamma_log_density(theta[noise_index(dims)], 1.1, 0.05, &d);
  if (grad) (*grad)[noise_index(dims)] = d;
  return lp;
}

void theta_bounds(int64_t dims, const GpFitOptions& o, std::vector<double>* lower, std::vector<double>* upper) {
  lower->assign(static_cast<size_t>(theta_size(dims)), std::log(o.min_length));
  upper->assign(static_cast<size_t>(theta_size(dims)), std::log(o.max_length));
  (*lower)[signal_index(dims)] = std::log(o.min_signal);
  (*upper)[signal_index(dims)] = std::log(o.max_signal);
  (*lower)[noise_index(dims)] = std::log(o.min_noise);
  (*upper)[noise_index(dims)] = std::log(o.max_noise);
}

std::vector<double> fit_theta(const Matrix& x, const std::vector<double>& y, const GpFitOptions& options, Rng& rng) {
  const int64_t dims = x.cols;
  std::vector<double> lower, upper;
  theta_bounds(dims, options, &lower, &upper);
  const Objective negative_posterior = [&](const std::vector<double>& theta, std::vector<double>* grad) {
    double value = log_marginal_likelihood(x, y, theta, grad);
    if (!std::isfinite(value)) return std::numeric_limits<double>::infinity();
    if (options.use_prior) {
      std::vector<double> prior_grad;
      value += log_prior(theta, dims, grad ? &prior_grad : nullptr);
      if (grad)
        for (size_t i = 0; i < grad->size(); ++i) (*grad)[i] += prior_grad[i];
    }
    if (grad)
      for (auto& g : *grad) g = -g;
    return -value;
  };
  std::vector<std::vector<double>> starts;
  std::vector<double> fixed(static_cast<size_t>(theta_size(dims)), std::log(0.3));
  fixed[signal_index(dims)] = 0.0;
  fixed[noise_index(dims)] = std::log(1e-4);
  starts.push_back(fixed);
  for (int64_t s = 0; s < options.random_starts; ++s) {
    std::vector<double> t(fixed.size());
    for (int64_t d = 0; d < dims; ++d) t[d] = rng.uniform(std::log(0.05), std::log(2.0));
    t[signal_index(dims)] = rng.uniform(std::log(0.3), std::log(3.0));
    t[noise_index(dims)] = rng.uniform(std::log(1e-6), std::log(0.1));
    starts.push_back(t);
  }
  LbfgsOptions lo;
  lo.max_iterations = options.max_iterations;
  lo.gradient_tol = 1e-5;
  lo.relative_tol = 1e-9;
  std::vector<double> best = fixed;
  double best_f = std::numeric_limits<double>::infinity();
  for (const auto& start : starts) {
    const auto r = minimize_box(negative_posterior, start, lower, upper, lo);
    if (r.f < best_f) {
      best_f = r.f;
      best = r.x;
    }
  }
  return best;
}

}  // namespace xtrain::tune
