// Gaussian-process regression with a Matérn-5/2 kernel and one length scale per input dimension,
// as used for Bayesian optimisation by Snoek et al. 2012 ("Practical Bayesian Optimization of
// Machine Learning Algorithms"); formulas from Rasmussen & Williams 2006 (eq. 2.25–2.26, 5.8–5.9).
// Hyperparameters live in one vector θ = [log ℓ_1..D, log σ_f², log σ_n²] so that the fit
// (gp_fit.cpp) can optimise them unconstrained-in-log-space inside a box.
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/tune/linalg.h"

namespace xtrain::tune {

// Number of entries of θ for D input dimensions, and where σ_f² and σ_n² sit.
inline int64_t theta_size(int64_t dims) { return dims + 2; }
inline int64_t signal_index(int64_t dims) { return dims; }
inline int64_t noise_index(int64_t dims) { return dims + 1; }

// Added to the diagonal on top of σ_n², never differentiated: keeps the factorisation stable when
// the fitted noise sits at its lower bound.
constexpr double kJitter = 1e-10;

// k(a, b) = σ_f² (1 + √5 r + 5/3 r²) exp(-√5 r), r² = Σ_d (a_d - b_d)² / ℓ_d².
double matern52(const double* a, const double* b, const std::vector<double>& theta, int64_t dims);

// log p(y | X, θ) = -½ yᵀK⁻¹y - ½ log|K| - n/2 log 2π with K = k(X, X) + (σ_n² + jitter) I, and
// (when grad != nullptr) its gradient with respect to θ. -inf when K is not positive definite.
double log_marginal_likelihood(const Matrix& x, const std::vector<double>& y, const std::vector<double>& theta,
                               std::vector<double>* grad);

// A GP conditioned on data with fixed θ; predictions are of the latent function (no noise term).
class GaussianProcess {
 public:
  // False when K is not positive definite (the object is then unusable).
  bool condition(Matrix x, std::vector<double> y, std::vector<double> theta);
  // Adds one observation and refactorises (kriging believer for pending points).
  bool add_point(const double* x, double y);
  // Posterior mean and variance at x; with non-null dmean/dvar also their gradients (D entries).
  void predict(const double* x, double* mean, double* var, double* dmean = nullptr, double* dvar = nullptr) const;

  int64_t size() const { return x_.rows; }
  int64_t dims() const { return x_.cols; }
  const std::vector<double>& theta() const { return theta_; }
  const Matrix& inputs() const { return x_; }

 private:
  Matrix x_, chol_;
  std::vector<double> y_, theta_, alpha_;
};

}  // namespace xtrain::tune
