// log h(z) in three regions. For z ≤ -1, h(z) = φ(z)(1 - |z|Ψ(z)) with Ψ = Φ/φ = √(π/2) erfcx(|z|/√2)
// (Mills' ratio); below z = -20 the series 1 - |z|Ψ = z⁻² Σ_k (-1)^k (2k+1)!! z^{-2k} converges to
// machine precision within 10 terms (the 11th is < 2e-16 of the sum), avoiding the cancellation.
#include "xtrain/tune/log_ei.h"

#include <cmath>
#include <limits>

namespace xtrain::tune {
namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrtHalfPi = 1.25331413731550025121;  // √(π/2)
constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log √(2π)
constexpr double kSeriesBelow = -20.0;

double log_phi(double z) { return -0.5 * z * z - kLogSqrt2Pi; }
double cdf(double z) { return 0.5 * std::erfc(-z / kSqrt2); }

// Σ_k (-1)^k (2k+1)!! u^k with u = 1/z²: the bracket of 1 - |z|Ψ(z) = z⁻² · S(z).
double tail_series(double z) {
  const double u = 1.0 / (z * z);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 10; ++k) {
    term *= -(2.0 * k + 1.0) * u;
    sum += term;
  }
  return sum;
}

// Mills' ratio series: |z| Ψ(z) = Σ_k (-1)^k (2k-1)!! u^k (k = 0: 1), u = 1/z².
double mills_series(double z) {
  const double u = 1.0 / (z * z);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 10; ++k) {
    term *= -(2.0 * k - 1.0) * u;
    sum += term;
  }
  return sum;
}

}  // namespace

double erfcx(double x) {
  if (x < 25.0) {
    // e^{x²} with x² split into hi + lo exactly (fma), so the rounding of x² does not become an
    // error of 2x²·ε in the result.
    const double hi = x * x;
    const double lo = std::fma(x, x, -hi);
    return std::exp(hi) * (1.0 + lo) * std::erfc(x);
  }
  // Asymptotic: 1/(x√π) Σ_k (-1)^k (2k-1)!! (2x²)^-k; at x ≥ 25 the term after k = 8 is < 1e-20.
  const double u = 1.0 / (2.0 * x * x);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 8; ++k) {
    term *= -(2.0 * k - 1.0) * u;
    sum += term;
  }
  return sum / (x * std::sqrt(M_PI));
}

double log_h(double z) {
  if (z > -1.0) return std::log(std::exp(log_phi(z)) + z * cdf(z));
  if (z >= kSeriesBelow) {
    const double a = -z * kSqrtHalfPi * erfcx(-z / kSqrt2);  // |z| Ψ(z) ∈ (0.65, 1)
    return log_phi(z) + std::log1p(-a);
  }
  if (!std::isfinite(z)) return -std::numeric_limits<double>::infinity();
  return log_phi(z) - 2.0 * std::log(-z) + std::log(tail_series(z));
}

double dlog_h(double z) {
  if (z > -1.0) return cdf(z) / (std::exp(log_phi(z)) + z * cdf(z));
  if (z >= kSeriesBelow) {
    const double psi = kSqrtHalfPi * erfcx(-z / kSqrt2);
    return psi / (1.0 + z * psi);
  }
  // Ψ/(1 - |z|Ψ) = (mills/|z|) / (S/z²) = |z| · mills / S.
  return -z * mills_series(z) / tail_series(z);
}

double log_expected_improvement(double mean, double var, double best, double* dmean, double* dvar) {
  const double v = std::max(var, kMinVariance);
  const double sigma = std::sqrt(v);
  const double z = (best - mean) / sigma;
  const double value = std::log(sigma) + log_h(z);
  if (dmean != nullptr || dvar != nullptr) {
    const double dz = dlog_h(z);  // z = (best - μ)/σ: ∂z/∂μ = -1/σ, ∂z/∂σ = -z/σ
    if (dmean) *dmean = -dz / sigma;
    if (dvar) *dvar = var > kMinVariance ? (1.0 - dz * z) / sigma / (2.0 * sigma) : 0.0;
  }
  return value;
}

}  // namespace xtrain::tune
