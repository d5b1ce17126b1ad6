// suggest_lr (see lr_finder.h): smoothing, divergence cut, slope in log(lr), steepest descent.
#include "xtrain/sched/lr_finder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "xtrain/base/error.h"

namespace xtrain::sched {

namespace {

std::vector<double> centred_average(const std::vector<double>& x, int64_t end, int64_t h) {
  std::vector<double> out(end);
  for (int64_t i = 0; i < end; ++i) {
    const int64_t lo = std::max<int64_t>(0, i - h), hi = std::min<int64_t>(end - 1, i + h);
    double sum = 0;
    for (int64_t k = lo; k <= hi; ++k) sum += x[k];
    out[i] = sum / static_cast<double>(hi - lo + 1);
  }
  return out;
}

// The first index where the loss is non-finite or the smoothed loss has diverged.
int64_t divergence(const std::vector<double>& smoothed) {
  const int64_t n = static_cast<int64_t>(smoothed.size());
  double best = smoothed[0];
  for (int64_t i = 1; i < n; ++i) {
    if (smoothed[i] > 4 * best && best > 0) return i;
    best = std::min(best, smoothed[i]);
  }
  return n;
}

}  // namespace

double suggest_lr(const std::vector<double>& lrs, const std::vector<double>& losses) {
  const int64_t n = static_cast<int64_t>(lrs.size());
  XTRAIN_USAGE_CHECK(losses.size() == lrs.size(), "lr_finder: ", lrs.size(), " lrs but ", losses.size(), " losses");
  XTRAIN_USAGE_CHECK(n >= 5, "lr_finder: need at least 5 points, got ", n);
  for (int64_t i = 0; i < n; ++i) {
    XTRAIN_USAGE_CHECK(lrs[i] > 0 && (i == 0 || lrs[i] > lrs[i - 1]),
                       "lr_finder: lrs must be > 0 and strictly increasing, got ", lrs[i], " at ", i);
  }
  int64_t end = 0;  // finite prefix
  while (end < n && std::isfinite(losses[end])) ++end;
  if (end < 3) return lrs[0];
  const auto raw = centred_average(losses, end, std::max<int64_t>(1, n / 20));
  end = divergence(raw);
  if (end < 3) return lrs[0];
  const std::vector<double> s(raw.begin(), raw.begin() + end);
  const int64_t lowest = std::min_element(s.begin(), s.end()) - s.begin();
  if (lowest == 0) return lrs[0];
  int64_t steepest = 0;
  double steepest_slope = INFINITY;
  for (int64_t i = 0; i <= lowest; ++i) {
    const int64_t a = std::max<int64_t>(0, i - 1), b = std::min<int64_t>(end - 1, i + 1);
    const double slope = (s[b] - s[a]) / (std::log(lrs[b]) - std::log(lrs[a]));
    if (slope < steepest_slope) {
      steepest_slope = slope;
      steepest = i;
    }
  }
  return lrs[steepest];
}

}  // namespace xtrain::sched
