// Histograms in TensorBoard's HistogramProto form, with TensorFlow's default bucket edges
// (tensorflow/core/lib/histogram/histogram.cc): ±1e-12·1.1^k up to 1e20, 0, and ±DBL_MAX;
// a value v falls in the first bucket whose limit is > v. Runs of empty buckets are collapsed
// into one, as TensorFlow's EncodeToProto does, so a weight histogram is a few dozen pairs.
#pragma once
#include <cstddef>
#include <vector>

namespace at {
class Tensor;
}

namespace xtrain::monitor {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // right edges (exclusive), increasing
  std::vector<double> bucket;        // counts
};

const std::vector<double>& default_bucket_limits();
// Non-finite values are skipped (TensorFlow rejects them; a diverging run should still log).
Histogram make_histogram(const double* values, size_t n);
// Any dtype and device: copied to CPU float64.
Histogram make_histogram(const at::Tensor& values);

}  // namespace xtrain::monitor
