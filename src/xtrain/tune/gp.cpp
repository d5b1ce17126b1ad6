// The GP's kernel, marginal likelihood with its analytic gradient, and posterior. The gradient
// uses ∂L/∂θ_j = ½ tr((ααᵀ - K⁻¹) ∂K/∂θ_j) (R&W eq. 5.9) with the closed-form Matérn derivatives
// ∂k/∂log ℓ_d = 5/3 σ_f² (1 + √5 r) e^{-√5 r} Δ_d²/ℓ_d², which has no 1/r singularity at r = 0.
#include "xtrain/tune/gp.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

namespace xtrain::tune {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;

// Inverse squared length scales 1/ℓ_d².
std::vector<double> inverse_sq_lengths(const std::vector<double>& theta, int64_t dims) {
  std::vector<double> w(static_cast<size_t>(dims));
  for (int64_t d = 0; d < dims; ++d) w[d] = std::exp(-2.0 * theta[d]);
  return w;
}

double scaled_sq_distance(const double* a, const double* b, const std::vector<double>& w) {
  double r2 = 0.0;
  for (size_t d = 0; d < w.size(); ++d) {
    const double delta = a[d] - b[d];
    r2 += delta * delta * w[d];
  }
  return r2;
}

// K(X, X) + (σ_n² + jitter) I.
Matrix kernel_matrix(const Matrix& x, const std::vector<double>& theta) {
  const int64_t n = x.rows, dims = x.cols;
  const auto w = inverse_sq_lengths(theta, dims);
  const double sf2 = std::exp(theta[signal_index(dims)]);
  const double sn2 = std::exp(theta[noise_index(dims)]);
  Matrix k(n, n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      const double r = std::sqrt(scaled_sq_distance(x.row(i), x.row(j), w));
      k(i, j) = k(j, i) = sf2 * (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r);
    }
    k(i, i) = sf2 + sn2 + kJitter;
  }
  return k;
}

}  // namespace

double matern52(const double* a, const double* b, const std::vector<double>& theta, int64_t dims) {
  const double r = std::sqrt(scaled_sq_distance(a, b, inverse_sq_lengths(theta, dims)));
  return std::exp(theta[signal_index(dims)]) * (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r);
}

double log_marginal_likelihood(const Matrix& x, const std::vector<double>& y, const std::vector<double>& theta,
                               std::vector<double>* grad) {
  const int64_t n = x.rows, dims = x.cols;
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(y.size()) == n && static_cast<int64_t>(theta.size()) == theta_size(dims));
  const Matrix k = kernel_matrix(x, theta);
  Matrix l;
  if (!cholesky(k, &l)) return -std::numeric_limits<double>::infinity();
  std::vector<double> alpha = y;
  solve_lower(l, alpha.data());
  double quad = 0.0;
  for (double v : alpha) quad += v * v;  // yᵀK⁻¹y = |L⁻¹y|²
  solve_lower_transposed(l, alpha.data());
  double log_det = 0.0;
  for (int64_t i = 0; i < n; ++i) log_det += 2.0 * std::log(l(i, i));
  const double lml = -0.5 * quad - 0.5 * log_det - 0.5 * static_cast<double>(n) * std::log(2.0 * M_PI);
  if (grad == nullptr) return lml;

  // W = ααᵀ - K⁻¹; ∂L/∂θ_j = ½ Σ_ij W_ij ∂K_ij/∂θ_j.
  Matrix wm = cholesky_inverse(l);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) wm(i, j) = alpha[i] * alpha[j] - wm(i, j);
  const auto w = inverse_sq_lengths(theta, dims);
  const double sf2 = std::exp(theta[signal_index(dims)]);
  const double sn2 = std::exp(theta[noise_index(dims)]);
  grad->assign(static_cast<size_t>(theta_size(dims)), 0.0);
  auto& g = *grad;
  double trace_w = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    trace_w += wm(i, i);
    g[signal_index(dims)] += 0.5 * wm(i, i) * sf2;  // diagonal of the kernel part is σ_f²
    for (int64_t j = 0; j < i; ++j) {
      const double r = std::sqrt(scaled_sq_distance(x.row(i), x.row(j), w));
      const double e = std::exp(-kSqrt5 * r);
      const double wij = wm(i, j);  // the pair (i, j) and (j, i): ½ · 2
      g[signal_index(dims)] += wij * sf2 * (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * e;
      const double common = wij * 5.0 / 3.0 * sf2 * (1.0 + kSqrt5 * r) * e;
      for (int64_t d = 0; d < dims; ++d) {
        const double delta = x(i, d) - x(j, d);
        g[d] += common * delta * delta * w[d];
      }
    }
  }
  g[noise_index(dims)] = 0.5 * trace_w * sn2;
  return lml;
}

bool GaussianProcess::condition(Matrix x, std::vector<double> y, std::vector<double> theta) {
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(y.size()) == x.rows &&
                        static_cast<int64_t>(theta.size()) == theta_size(x.cols));
  x_ = std::move(x);
  y_ = std::move(y);
  theta_ = std::move(theta);
  if (!cholesky(kernel_matrix(x_, theta_), &chol_)) return false;
  alpha_ = y_;
  solve_lower(chol_, alpha_.data());
  solve_lower_transposed(chol_, alpha_.data());
  return true;
}

bool GaussianProcess::add_point(const double* x, double y) {
  Matrix grown(x_.rows + 1, x_.cols);
  std::copy(x_.data.begin(), x_.data.end(), grown.data.begin());
  std::copy(x, x + x_.cols, grown.row(x_.rows));
  auto ys = y_;
  ys.push_back(y);
  return condition(std::move(grown), std::move(ys), theta_);
}

void GaussianProcess::predict(const double* x, double* mean, double* var, double* dmean, double* dvar) const {
  const int64_t n = x_.rows, dims = x_.cols;
  const auto w = inverse_sq_lengths(theta_, dims);
  const double sf2 = std::exp(theta_[signal_index(dims)]);
  const bool want_grad = dmean != nullptr || dvar != nullptr;
  std::vector<double> k(static_cast<size_t>(n));
  Matrix dk(want_grad ? n : 0, dims);  // ∂k(x, x_i)/∂x_d = -5/3 σ_f² (1 + √5 r) e^{-√5 r} (x_d - x_id)/ℓ_d²
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double r = std::sqrt(scaled_sq_distance(x, x_.row(i), w));
    const double e = std::exp(-kSqrt5 * r);
    k[i] = sf2 * (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * e;
    m += k[i] * alpha_[i];
    if (want_grad) {
      const double common = -5.0 / 3.0 * sf2 * (1.0 + kSqrt5 * r) * e;
      for (int64_t d = 0; d < dims; ++d) dk(i, d) = common * (x[d] - x_(i, d)) * w[d];
    }
  }
  std::vector<double> v = k;
  solve_lower(chol_, v.data());
  double vv = 0.0;
  for (double e : v) vv += e * e;
  *mean = m;
  *var = std::max(sf2 - vv, 0.0);
  if (!want_grad) return;
  solve_lower_transposed(chol_, v.data());  // v = K⁻¹ k: ∂var/∂x = -2 (K⁻¹k)ᵀ ∂k/∂x
  for (int64_t d = 0; d < dims; ++d) {
    double gm = 0.0, gv = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      gm += dk(i, d) * alpha_[i];
      gv += dk(i, d) * v[i];
    }
    if (dmean) dmean[d] = gm;
    if (dvar) dvar[d] = -2.0 * gv;
  }
}

}  // namespace xtrain::tune
