// Expected improvement in log space (Ament et al. 2023, "Unexpected Improvements to Expected
// Improvement"): for minimisation EI = σ h(z), z = (f* - μ)/σ, h(z) = φ(z) + zΦ(z), and log h is
// computed without underflow or cancellation for every z: directly for z > -1, through
// erfcx(x) = e^{x²} erfc(x) for -20 ≤ z ≤ -1, and by its asymptotic series below -20.
#pragma once

namespace xtrain::tune {

// e^{x²} erfc(x), accurate to a few ulps for x ≥ 0 (the range the acquisition needs).
double erfcx(double x);
// log h(z) and d/dz log h(z) = Φ(z)/h(z).
double log_h(double z);
double dlog_h(double z);

// log EI at a point with posterior mean μ and variance σ² for minimisation with incumbent `best`;
// with non-null pointers also ∂/∂μ and ∂/∂σ². Variances are floored at kMinVariance.
double log_expected_improvement(double mean, double var, double best, double* dmean = nullptr, double* dvar = nullptr);
constexpr double kMinVariance = 1e-16;

}  // namespace xtrain::tune
