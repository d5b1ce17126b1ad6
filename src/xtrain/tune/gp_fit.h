// Fitting the GP's hyperparameters: maximise log p(y | X, θ) + log p(θ) over a box, from a fixed
// start and a few random ones, keeping the best. The weak priors are BoTorch's former
// SingleTaskGP defaults (ℓ ~ Gamma(3, 6), σ_f² ~ Gamma(2, 0.15), σ_n² ~ Gamma(1.1, 0.05) for
// standardised targets); they and the bounds stop the length scales collapsing on few points.
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/tune/linalg.h"
#include "xtrain/tune/rng.h"

namespace xtrain::tune {

struct GpFitOptions {
  int64_t random_starts = 3;    // in addition to the fixed start
  int64_t max_iterations = 60;  // L-BFGS iterations per start
  bool use_prior = true;
  double min_length = 0.01, max_length = 20.0;  // inputs are in the unit cube
  double min_signal = 0.05, max_signal = 20.0;  // targets are standardised
  double min_noise = 1e-8, max_noise = 1.0;
};

// Sum of the priors' log densities over θ (up to a constant), and its gradient.
double log_prior(const std::vector<double>& theta, int64_t dims, std::vector<double>* grad);

// The box on θ (log scale) the options describe.
void theta_bounds(int64_t dims, const GpFitOptions& options, std::vector<double>* lower, std::vector<double>* upper);

// θ maximising log p(y | X, θ) (+ log p(θ)). `rng` draws the random starts.
std::vector<double> fit_theta(const Matrix& x, const std::vector<double>& y, const GpFitOptions& options, Rng& rng);

}  // namespace xtrain::tune
