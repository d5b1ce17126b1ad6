// Observers: running min/max in ATen reductions; the histogram is counted by at::histc and kept in
// doubles; the KL search is TensorRT's (as NVIDIA's pytorch-quantization _compute_amax_entropy).
#include "xtrain/compress/quant/observer.h"

#include <ATen/Functions.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::compress {

AffineQParams Observer::qparams() const {
  TORCH_CHECK(seen_, "compress: ", name(), " observer has seen no data (calibration ran no batch through this layer)");
  const auto [lo, hi] = range();
  return choose_affine_qparams(lo, hi);
}

void Observer::track(const at::Tensor& x) {
  const auto [lo, hi] = at::aminmax(x.detach().to(at::kFloat));
  const double mn = lo.item<double>(), mx = hi.item<double>();
  TORCH_CHECK(std::isfinite(mn) && std::isfinite(mx), "compress: observer saw a non-finite activation (", mn, ", ", mx,
              ")");
  min_ = seen_ ? std::min(min_, mn) : mn;
  max_ = seen_ ? std::max(max_, mx) : mx;
  seen_ = true;
}

std::pair<double, double> MinMaxObserver::range() const { return {min_, max_}; }

void MovingAverageMinMaxObserver::observe(const at::Tensor& x) {
  const auto [lo, hi] = at::aminmax(x.detach().to(at::kFloat));
  const double mn = lo.item<double>(), mx = hi.item<double>();
  if (!seen_) {
    min_ = mn, max_ = mx, seen_ = true;
    return;
  }
  min_ += c_ * (mn - min_);
  max_ += c_ * (mx - max_);
}

std::pair<double, double> MovingAverageMinMaxObserver::range() const { return {min_, max_}; }

void MovingAverageMinMaxObserver::reset_to(double min, double max) {
  min_ = min, max_ = max, seen_ = true;
}

// ---- the histogram

void SignedHistogram::grow_to(double amax) {
  if (counts_.empty()) {
    counts_.assign(kBins, 0.0);
    radius_ = amax > 0 ? amax : 1e-8;
    return;
  }
  // Doubling R maps old bin i onto new bin (i + kBins/2) / 2: an exact merge of neighbours.
  while (amax > radius_) {
    std::vector<double> merged(kBins, 0.0);
    for (int64_t i = 0; i < kBins; ++i) merged[(i + kBins / 2) / 2] += counts_[i];
    counts_.swap(merged);
    radius_ *= 2;
  }
}

void SignedHistogram::add(const at::Tensor& x) {
  const auto xf = x.detach().to(at::kFloat).reshape({-1});
  if (xf.numel() == 0) return;
  grow_to(xf.abs().max().item<double>());
  const auto h = at::histc(xf, kBins, -radius_, radius_).to(at::kDouble).contiguous();
  const double* p = h.data_ptr<double>();
  for (int64_t i = 0; i < kBins; ++i) counts_[i] += p[i];
}

double SignedHistogram::quantile(double fraction) const {
  double total = 0.0;
  for (double c : counts_) total += c;
  const double target = std::clamp(fraction, 0.0, 1.0) * total;
  const double width = 2 * radius_ / kBins;
  double below = 0.0;
  for (int64_t i = 0; i < kBins; ++i) {
    if (counts_[i] > 0 && below + counts_[i] >= target) {
      const double inside = (target - below) / counts_[i];
      return -radius_ + (static_cast<double>(i) + inside) * width;
    }
    below += counts_[i];
  }
  return radius_;
}

std::vector<double> SignedHistogram::folded() const {
  std::vector<double> out(kBins / 2, 0.0);
  for (int64_t i = 0; i < kBins / 2; ++i) out[i] = counts_[kBins / 2 + i] + counts_[kBins / 2 - 1 - i];
  return out;
}

PercentileObserver::PercentileObserver(double percentile) : percentile_(percentile) {
  XTRAIN_USAGE_CHECK(percentile > 50 && percentile <= 100, "compress: quantization.percentile must be in (50, 100], got ",
                     percentile);
}

void PercentileObserver::observe(const at::Tensor& x) {
  track(x);
  hist_.add(x);
}

std::pair<double, double> PercentileObserver::range() const {
  const double lo = hist_.quantile(1.0 - percentile_ / 100.0), hi = hist_.quantile(percentile_ / 100.0);
  return {std::max(min_, lo), std::min(max_, hi)};
}

void EntropyObserver::observe(const at::Tensor& x) {
  track(x);
  hist_.add(x);
}

std::pair<double, double> EntropyObserver::range() const {
  // Non-negative data (after ReLU) gets all 256 levels on [0, T]; signed data 128 per side.
  const int64_t levels = min_ >= 0 ? 256 : 128;
  const auto bins = hist_.folded();
  const double width = hist_.radius() / static_cast<double>(bins.size());
  const double threshold = static_cast<double>(entropy_threshold_bin(bins, levels)) * width;
  return {std::max(min_, -threshold), std::min(max_, threshold)};
}

namespace {

// KL(p || q) of two unnormalised distributions: Σ p log(p / q) over p > 0 (q = 0 there: +inf).
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double sp = 0.0, sq = 0.0;
  for (size_t i = 0; i < p.size(); ++i) sp += p[i], sq += q[i];
  double kl = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    if (q[i] <= 0) return std::numeric_limits<double>::infinity();
    const double pi = p[i] / sp, qi = q[i] / sq;
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

}  // namespace

int64_t entropy_threshold_bin(std::vector<double> bins, int64_t levels, int64_t start) {
  const int64_t n = static_cast<int64_t>(bins.size());
  TORCH_CHECK(n > start && levels > 0, "compress: entropy calibration needs more than ", start, " bins, got ", n);
  bins[0] = bins[1];  // TensorRT: do not let a spike at 0 (ReLU outputs) dominate
  std::vector<double> tail(n + 1, 0.0);  // tail[i] = Σ bins[i:]
  for (int64_t i = n - 1; i >= 0; --i) tail[i] = tail[i + 1] + bins[i];
  double best = std::numeric_limits<double>::infinity();
  int64_t best_i = n;
  std::vector<double> sums(levels), nonzero(levels);
  for (int64_t i = start; i <= n; ++i) {
    // Bin j < i falls in level floor(j · levels / i); empty bins stay empty in q.
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(nonzero.begin(), nonzero.end(), 0.0);
    for (int64_t j = 0; j < i; ++j) {
      if (bins[j] == 0) continue;
      const int64_t l = j * levels / i;
      sums[l] += bins[j];
      nonzero[l] += 1;
    }
    std::vector<double> p(bins.begin(), bins.begin() + i), q(i, 0.0);
    p[i - 1] += tail[i];  // the clipped outliers land in the last kept bin
    for (int64_t j = 0; j < i; ++j) {
      if (bins[j] != 0) q[j] = sums[j * levels / i] / nonzero[j * levels / i];
    }
    const double kl = kl_divergence(p, q);
    if (kl <= best) best = kl, best_i = i;
  }
  return best_i;
}

std::unique_ptr<Observer> make_observer(const std::string& kind, double percentile, const std::string& key) {
  if (kind == "minmax") return std::make_unique<MinMaxObserver>();
  if (kind == "percentile") return std::make_unique<PercentileObserver>(percentile);
  if (kind == "entropy") return std::make_unique<EntropyObserver>();
  XTRAIN_USAGE_ERROR("compress: ", key, " must be minmax, percentile or entropy, got \"", kind, "\"",
                     did_you_mean_suffix(kind, {"minmax", "percentile", "entropy"}));
}

}  // namespace xtrain::compress
