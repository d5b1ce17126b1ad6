#include "xtrain/monitor/histogram.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace xtrain::monitor {

const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> kLimits = [] {
    std::vector<double> pos, neg;
    for (double v = 1e-12; v < 1e20; v *= 1.1) {
      pos.push_back(v);
      neg.push_back(-v);
    }
    pos.push_back(DBL_MAX);
    neg.push_back(-DBL_MAX);
    std::vector<double> out(neg.rbegin(), neg.rend());
    out.push_back(0.0);
    out.insert(out.end(), pos.begin(), pos.end());
    return out;
  }();
  return kLimits;
}

Histogram make_histogram(const double* values, size_t n) {
  const auto& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  for (size_t i = 0; i < n; ++i) {
    const double v = values[i];
    if (!std::isfinite(v)) continue;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
    const size_t b = std::upper_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[std::min(b, limits.size() - 1)] += 1;
  }
  if (h.num == 0) h.min = h.max = 0;
  for (size_t i = 0; i < counts.size();) {  // TensorFlow's EncodeToProto(preserve_zero_buckets=false)
    double end = limits[i], count = counts[i];
    ++i;
    if (count <= 0) {
      while (i < counts.size() && counts[i] <= 0) end = limits[i], count = counts[i], ++i;
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

Histogram make_histogram(const at::Tensor& values) {
  const at::Tensor v = values.detach().to(at::kCPU, at::kDouble).contiguous();
  return make_histogram(v.data_ptr<double>(), static_cast<size_t>(v.numel()));
}

}  // namespace xtrain::monitor
