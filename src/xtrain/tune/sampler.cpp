// GP-EI proposals: standardise, fit θ, condition, add pending points as believed observations,
// then maximise log EI over valid points of the space (acquisition.cpp).
#include "xtrain/tune/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/tune/acquisition.h"
#include "xtrain/tune/gp.h"

namespace xtrain::tune {
namespace {

// Failed trials (NaN) become the worst finite value: the GP then steers away from them.
std::vector<double> imputed_values(const std::vector<Observation>& done) {
  double worst = -std::numeric_limits<double>::infinity();
  for (const auto& o : done)
    if (std::isfinite(o.value)) worst = std::max(worst, o.value);
  std::vector<double> y;
  for (const auto& o : done) y.push_back(std::isfinite(o.value) ? o.value : worst);
  return y;
}

void standardise(std::vector<double>& y) {
  double mean = 0.0;
  for (double v : y) mean += v;
  mean /= static_cast<double>(y.size());
  double var = 0.0;
  for (double v : y) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / static_cast<double>(y.size()));
  for (double& v : y) v = sd > 1e-12 ? (v - mean) / sd : v - mean;
}

}  // namespace

std::vector<double> RandomSampler::propose(const std::vector<Observation>&, const std::vector<std::vector<double>>&,
                                           Rng& rng) {
  return space_.encode(space_.sample(rng));
}

GpSampler::GpSampler(SearchSpace space, GpSamplerOptions options) : space_(std::move(space)), options_(options) {
  if (options_.initial_random <= 0) options_.initial_random = std::max<int64_t>(5, space_.dims() + 1);
}

std::vector<double> GpSampler::propose(const std::vector<Observation>& done,
                                       const std::vector<std::vector<double>>& pending, Rng& rng) {
  int64_t finite = 0;
  for (const auto& o : done) finite += std::isfinite(o.value) ? 1 : 0;
  const auto n_seen = static_cast<int64_t>(done.size() + pending.size());
  if (n_seen < options_.initial_random || finite < 2) {
    last_theta_.clear();
    return space_.encode(space_.sample(rng));
  }
  std::vector<double> y = imputed_values(done);
  standardise(y);
  Matrix x(static_cast<int64_t>(done.size()), space_.dims());
  for (size_t i = 0; i < done.size(); ++i)
    std::copy(done[i].x.begin(), done[i].x.end(), x.row(static_cast<int64_t>(i)));
  auto theta = fit_theta(x, y, options_.fit, rng);
  GaussianProcess gp;
  bool ok = gp.condition(x, y, theta);
  for (double floor = 1e-6; !ok && floor <= 1e-2; floor *= 100) {  // ill-conditioned: more noise
    theta[noise_index(space_.dims())] = std::max(theta[noise_index(space_.dims())], std::log(floor));
    ok = gp.condition(x, y, theta);
  }
  if (!ok) return space_.encode(space_.sample(rng));
  last_theta_ = theta;
  // The incumbent is the best posterior mean at an observed point: robust to noisy values.
  double best = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < x.rows; ++i) {
    double m = 0.0, v = 0.0;
    gp.predict(x.row(i), &m, &v);
    best = std::min(best, m);
  }
  for (const auto& p : pending) {
    double m = 0.0, v = 0.0;
    gp.predict(p.data(), &m, &v);
    if (!gp.add_point(p.data(), m)) break;  // a duplicate pending point: the rest changes nothing
  }
  std::vector<std::vector<double>> avoid = pending;
  for (const auto& o : done) avoid.push_back(o.x);
  AcquisitionOptions ao;
  ao.candidates = options_.candidates;
  ao.local_candidates = options_.local_candidates;
  ao.local_starts = options_.local_starts;
  std::vector<std::vector<double>> anchors;  // the best observed points, for local candidates
  std::vector<size_t> order(done.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return y[a] < y[b]; });
  for (size_t i = 0; i < order.size() && i < 5; ++i) anchors.push_back(done[order[i]].x);
  return maximize_log_ei(gp, best, space_, anchors, avoid, ao, rng);
}

std::unique_ptr<Sampler> make_sampler(const std::string& name, const SearchSpace& space, int64_t initial_random) {
  XTRAIN_USAGE_CHECK(initial_random >= 0, "tune: --gp-initial must be >= 0, got ", initial_random);
  GpSamplerOptions options;
  options.initial_random = initial_random;
  if (name == "gp") return std::make_unique<GpSampler>(space, options);
  if (name == "random") return std::make_unique<RandomSampler>(space);
  XTRAIN_USAGE_ERROR("tune: unknown sampler '", name, "'", did_you_mean_suffix(name, {"gp", "random"}),
                     "; use gp or random");
}

}  // namespace xtrain::tune
