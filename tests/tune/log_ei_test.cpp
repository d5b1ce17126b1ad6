// log h(z) (EI of a unit normal) against 900-digit decimal values and the asymptotic series
// (tests/reference/gen_gp.py), against float64 math.erfc where that is accurate, and log EI
// against the closed form and a quadrature of E[max(best - Y, 0)].
#include "xtrain/tune/log_ei.h"

#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/fixtures.h"

namespace xtrain::tune::log_ei_test {
namespace {

using testing::expect_close;

std::vector<double> to_vector(const at::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

TEST(LogEi, LogHMatchesHighPrecisionReference) {
  auto f = testing::load_tensors("gp.pt");
  const auto z = to_vector(f["z"]);
  std::vector<double> lh, dlh;
  for (double v : z) {
    lh.push_back(log_h(v));
    dlh.push_back(dlog_h(v));
  }
  // The erfcx branch loses ~ε·z² ≤ 5e-14 of h to cancellation (absolute error in log h), the
  // series and direct branches ~1e-15; values reach -5e15, where only the relative error counts.
  expect_close(at::tensor(lh, at::kDouble), f["log_h"], 1e-14, 1e-12, "log h(z)");
  expect_close(at::tensor(dlh, at::kDouble), f["dlog_h"], 1e-11, 1e-12, "Φ(z)/h(z)");
}

TEST(LogEi, LogHMatchesFloat64ErfcAtModerateZ) {
  auto f = testing::load_tensors("gp.pt");
  std::vector<double> h;
  for (double z : to_vector(f["z_float"])) h.push_back(std::exp(log_h(z)));
  // The float64 reference φ + zΦ cancels by up to ~30× at z = -5: ~1e-14 relative.
  expect_close(at::tensor(h, at::kDouble), f["h_float"], 1e-12, 0, "h(z) vs math.erfc");
}

TEST(LogEi, ContinuousAcrossBranches) {
  for (double z0 : {-1.0, -20.0}) {
    const double below = log_h(std::nextafter(z0, -100.0)), at = log_h(z0);
    EXPECT_NEAR(below, at, 1e-12 * std::abs(at) + 1e-12) << "log h jumps at z = " << z0;
    EXPECT_NEAR(dlog_h(std::nextafter(z0, -100.0)), dlog_h(z0), 1e-10 * std::abs(dlog_h(z0))) << z0;
  }
}

TEST(LogEi, ErfcxMatchesLongDouble) {
  for (double x : {0.0, 0.3, 1.0, 3.7, 10.0, 14.2, 24.99, 25.0, 26.5, 40.0, 100.0}) {
    const long double lx = x;
    const long double ref = std::exp(lx * lx) * std::erfc(lx);  // 64-bit mantissa, exponent to 1e4932
    // Both branches: a few ulps (exp·erfc with x² split exactly; the series truncated below 1e-20).
    EXPECT_NEAR(erfcx(x), static_cast<double>(ref), 1e-14 * static_cast<double>(ref)) << "x = " << x;
  }
}

double closed_form_ei(double mean, double sd, double best) {
  const double z = (best - mean) / sd;
  return (best - mean) * 0.5 * std::erfc(-z / std::sqrt(2.0)) + sd * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
}

// E[max(best - Y, 0)], Y ~ N(mean, sd²), by composite Simpson on [min(mean, best) - 12 sd, best]:
// the integrand there is concentrated within sd of best, so the cut-off tail is < e^-72.
double quadrature_ei(double mean, double sd, double best) {
  const double lo = std::min(mean, best) - 12 * sd;
  const int n = 20000;
  const double h = (best - lo) / n;
  double s = 0.0;
  for (int i = 0; i <= n; ++i) {
    const double y = lo + i * h;
    const double g = (best - y) * std::exp(-0.5 * std::pow((y - mean) / sd, 2)) / (sd * std::sqrt(2 * M_PI));
    s += g * (i == 0 || i == n ? 1 : i % 2 ? 4 : 2);
  }
  return s * h / 3;
}

TEST(LogEi, ExpectedImprovementMatchesClosedFormAndQuadrature) {
  for (double mean : {-1.0, 0.0, 0.7, 2.5})
    for (double sd : {0.05, 0.3, 1.0, 4.0})
      for (double best : {-0.5, 0.0, 1.0}) {
        const double ei = std::exp(log_expected_improvement(mean, sd * sd, best));
        const double z = (best - mean) / sd;
        if (z > -5) {  // the closed form cancels below z ≈ -5
          EXPECT_NEAR(ei, closed_form_ei(mean, sd, best), 1e-12 * ei) << mean << " " << sd << " " << best;
        }
        // Simpson with 20000 intervals: error ~h⁴ f'''' ≪ 1e-9 relative where EI > 1e-200.
        if (ei > 1e-200) {
          EXPECT_NEAR(ei, quadrature_ei(mean, sd, best), 1e-9 * ei) << mean << " " << sd << " " << best;
        }
      }
}

TEST(LogEi, GradientsMatchFiniteDifferences) {
  for (double z : {-30.0, -8.0, -1.5, 0.2, 3.0}) {
    const double mean = 0.4, var = 0.09, best = mean + z * 0.3;
    double dm = 0, dv = 0;
    log_expected_improvement(mean, var, best, &dm, &dv);
    const double h = 1e-6;
    const double fd_m =
        (log_expected_improvement(mean + h, var, best) - log_expected_improvement(mean - h, var, best)) / (2 * h);
    const double fd_v =
        (log_expected_improvement(mean, var + h, best) - log_expected_improvement(mean, var - h, best)) / (2 * h);
    // Central differences at h = 1e-6 on values up to |log EI| ≈ 450: ~1e-7 relative.
    EXPECT_NEAR(dm, fd_m, 1e-6 * std::abs(fd_m) + 1e-6) << "z = " << z;
    EXPECT_NEAR(dv, fd_v, 1e-6 * std::abs(fd_v) + 1e-6) << "z = " << z;
  }
}

}  // namespace
}  // namespace xtrain::tune::log_ei_test
