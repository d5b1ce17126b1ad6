// The Gaussian process against references it did not produce: a hand-derived two-point closed
// form, a numpy implementation with torch-autograd gradients (tests/reference/gen_gp.py), and
// finite differences for every analytic gradient (marginal likelihood, priors, posterior, log EI).
#include "xtrain/tune/gp.h"

#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/tune/acquisition.h"
#include "xtrain/tune/gp_fit.h"
#include "xtrain/tune/rng.h"

namespace xtrain::tune::gp_test {
namespace {

using testing::expect_close;

at::Tensor vec(const std::vector<double>& v) { return at::tensor(v, at::kDouble); }

Matrix to_matrix(const at::Tensor& t) {
  Matrix m(t.size(0), t.size(1));
  auto c = t.contiguous();
  std::copy(c.data_ptr<double>(), c.data_ptr<double>() + c.numel(), m.data.begin());
  return m;
}

std::vector<double> to_vector(const at::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

Matrix random_points(int64_t n, int64_t dims, Rng& rng) {
  Matrix x(n, dims);
  for (auto& v : x.data) v = rng.uniform();
  return x;
}

TEST(Linalg, CholeskyInverseTimesMatrixIsIdentity) {
  Rng rng(3);
  const int64_t n = 12;
  Matrix b = random_points(n, n, rng), a(n, n);
  for (int64_t i = 0; i < n; ++i)  // A = B Bᵀ + I: symmetric positive definite
    for (int64_t j = 0; j < n; ++j) {
      double s = i == j ? 1.0 : 0.0;
      for (int64_t k = 0; k < n; ++k) s += b(i, k) * b(j, k);
      a(i, j) = s;
    }
  Matrix l;
  ASSERT_TRUE(cholesky(a, &l));
  const Matrix inv = cholesky_inverse(l);
  std::vector<double> prod;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < n; ++k) s += inv(i, k) * a(k, j);
      prod.push_back(s);
    }
  // cond(A) ≈ 1e3 here: products of an inverse with its matrix are exact to ~cond·ε.
  expect_close(vec(prod), at::eye(n, at::kDouble).flatten(), 0, 1e-11, "A⁻¹A");
  Matrix not_pd(2, 2);
  not_pd(0, 0) = 1, not_pd(1, 0) = 2, not_pd(1, 1) = 1;  // eigenvalues 3, -1
  EXPECT_FALSE(cholesky(not_pd, &l));
}

// Two points in one dimension: K is 2×2, so mean and variance have a closed form by hand.
TEST(Gp, PosteriorMatchesTwoPointClosedForm) {
  const double ell = 0.4, sf2 = 1.5, sn2 = 0.1;
  auto k = [&](double r) { return sf2 * (1 + std::sqrt(5.0) * r + 5.0 / 3.0 * r * r) * std::exp(-std::sqrt(5.0) * r); };
  const double a = sf2 + sn2 + kJitter, b = k(0.5 / ell);
  const double det = a * a - b * b;
  const double y1 = 1.0, y2 = -0.5;
  const double ks1 = k(0.25 / ell), ks2 = k(0.25 / ell);  // x* = 0.45 is midway
  const double mean = (ks1 * (a * y1 - b * y2) + ks2 * (-b * y1 + a * y2)) / det;
  const double var = sf2 - (ks1 * (a * ks1 - b * ks2) + ks2 * (-b * ks1 + a * ks2)) / det;
  Matrix x(2, 1);
  x(0, 0) = 0.2;
  x(1, 0) = 0.7;
  GaussianProcess gp;
  ASSERT_TRUE(gp.condition(x, {y1, y2}, {std::log(ell), std::log(sf2), std::log(sn2)}));
  const double xs = 0.45;
  double m = 0, v = 0;
  gp.predict(&xs, &m, &v);
  // Both sides are a handful of float64 operations on well-conditioned 2×2 systems.
  EXPECT_NEAR(m, mean, 1e-14);
  EXPECT_NEAR(v, var, 1e-14);
}

TEST(Gp, PosteriorMatchesNumpy) {
  auto f = testing::load_tensors("gp.pt");
  GaussianProcess gp;
  ASSERT_TRUE(gp.condition(to_matrix(f["x"]), to_vector(f["y"]), to_vector(f["theta"])));
  const Matrix xs = to_matrix(f["xs"]);
  std::vector<double> mean, var, dmean, dvar;
  for (int64_t i = 0; i < xs.rows; ++i) {
    double m = 0, v = 0, dm[3], dv[3];
    gp.predict(xs.row(i), &m, &v, dm, dv);
    mean.push_back(m);
    var.push_back(v);
    dmean.insert(dmean.end(), dm, dm + 3);
    dvar.insert(dvar.end(), dv, dv + 3);
  }
  // float64 on both sides with different factorisations; cond(K) ≈ 1e3 here, so ~1e-13 relative,
  // and the variance at a training point (≈ 0.01) is a difference of O(1) terms: atol 1e-12.
  expect_close(vec(mean), f["mean"], 1e-10, 1e-12, "posterior mean");
  expect_close(vec(var), f["var"], 1e-10, 1e-12, "posterior variance");
  expect_close(vec(dmean), f["dmean"].flatten(), 1e-9, 1e-11, "d mean / d x*");
  expect_close(vec(dvar), f["dvar"].flatten(), 1e-9, 1e-11, "d var / d x*");
}

TEST(Gp, MarginalLikelihoodAndGradientMatchNumpyAndAutograd) {
  auto f = testing::load_tensors("gp.pt");
  std::vector<double> grad;
  const double lml = log_marginal_likelihood(to_matrix(f["x"]), to_vector(f["y"]), to_vector(f["theta"]), &grad);
  // Same float64 formula evaluated in a different order: ~1e-14 relative.
  expect_close(vec({lml}), f["lml"], 1e-11, 0, "log marginal likelihood");
  expect_close(vec(grad), f["lml_grad"], 1e-9, 1e-11, "d lml / d theta");
}

// Central differences with step h: truncation error O(h²·f''') ≈ 1e-9 relative at h = 1e-5.
void expect_gradient_matches_fd(const std::function<double(const std::vector<double>&, std::vector<double>*)>& f,
                                const std::vector<double>& at, double rtol, const std::string& what) {
  std::vector<double> grad;
  f(at, &grad);
  std::vector<double> fd;
  const double h = 1e-5;
  for (size_t i = 0; i < at.size(); ++i) {
    auto p = at, m = at;
    p[i] += h;
    m[i] -= h;
    fd.push_back((f(p, nullptr) - f(m, nullptr)) / (2 * h));
  }
  expect_close(vec(grad), vec(fd), rtol, 1e-7, what);
}

TEST(Gp, MarginalLikelihoodGradientMatchesFiniteDifferences) {
  Rng rng(11);
  const int64_t n = 30, dims = 6;
  const Matrix x = random_points(n, dims, rng);
  std::vector<double> y;
  for (int64_t i = 0; i < n; ++i) y.push_back(std::sin(5 * x(i, 0)) + x(i, 1) * x(i, 2) + 0.1 * rng.normal());
  std::vector<double> theta = {std::log(0.3), std::log(0.7), std::log(1.1), std::log(2.0),
                               std::log(0.5), std::log(0.9), std::log(1.2), std::log(0.02)};
  expect_gradient_matches_fd(
      [&](const std::vector<double>& t, std::vector<double>* g) { return log_marginal_likelihood(x, y, t, g); }, theta,
      1e-6, "d lml / d theta (finite differences)");
  expect_gradient_matches_fd(
      [&](const std::vector<double>& t, std::vector<double>* g) { return log_prior(t, dims, g); }, theta, 1e-6,
      "d log prior / d theta (finite differences)");
}

TEST(Gp, LogEiGradientMatchesFiniteDifferences) {
  Rng rng(5);
  const int64_t n = 15, dims = 3;
  const Matrix x = random_points(n, dims, rng);
  std::vector<double> y;
  for (int64_t i = 0; i < n; ++i) y.push_back(std::cos(4 * x(i, 0)) + x(i, 2));
  GaussianProcess gp;
  ASSERT_TRUE(gp.condition(x, y, {std::log(0.4), std::log(0.6), std::log(0.9), 0.0, std::log(1e-4)}));
  const double best = *std::min_element(y.begin(), y.end());
  for (int k = 0; k < 4; ++k) {
    std::vector<double> at = {rng.uniform(), rng.uniform(), rng.uniform()};
    expect_gradient_matches_fd(
        [&](const std::vector<double>& p, std::vector<double>* g) {
          if (g) g->resize(3);
          return gp_log_ei(gp, p.data(), best, g ? g->data() : nullptr);
        },
        at, 1e-5, "d log EI / d x (finite differences)");
  }
}

// Data that varies along dimension 0 only, with noise of known size: the fit gives dimension 0 a
// short length scale, the others long ones, and a noise variance near the true one.
TEST(Gp, FitFindsRelevantDimensionsAndNoise) {
  Rng rng(21);
  const int64_t n = 60, dims = 3;
  const Matrix x = random_points(n, dims, rng);
  const double noise_sd = 0.1;
  std::vector<double> y;
  for (int64_t i = 0; i < n; ++i) y.push_back(std::sin(6 * x(i, 0)) + noise_sd * rng.normal());
  double mean = 0, var = 0;
  for (double v : y) mean += v / n;
  for (double v : y) var += (v - mean) * (v - mean) / n;
  for (double& v : y) v = (v - mean) / std::sqrt(var);
  Rng fit_rng(1);
  const auto theta = fit_theta(x, y, GpFitOptions{}, fit_rng);
  EXPECT_LT(std::exp(theta[0]), 0.6);
  EXPECT_GT(std::exp(theta[1]), 2.0 * std::exp(theta[0]));
  EXPECT_GT(std::exp(theta[2]), 2.0 * std::exp(theta[0]));
  const double true_noise = noise_sd * noise_sd / var;  // in standardised units
  const double fitted = std::exp(theta[noise_index(dims)]);
  // 60 noisy points estimate a variance to within a factor ~1.5 (χ² with ~50 dof); allow 3.
  EXPECT_GT(fitted, true_noise / 3) << "fitted noise " << fitted << " vs " << true_noise;
  EXPECT_LT(fitted, true_noise * 3) << "fitted noise " << fitted << " vs " << true_noise;
}

}  // namespace
}  // namespace xtrain::tune::gp_test
