// Activation observers for post-training calibration: they watch the tensors that reach a layer's
// input and choose its per-tensor uint8 range. MinMax (torch.ao.quantization.MinMaxObserver),
// MovingAverageMinMax (its QAT twin, averaging constant 0.01), Percentile (the p-th and (100-p)-th
// percentiles) and Entropy (TensorRT's KL-divergence threshold; Migacz, "8-bit Inference with
// TensorRT", GTC 2017). Design choice: Percentile and Entropy share one signed histogram of 4096
// bins over [-R, R] whose R only ever doubles (neighbouring bins merge exactly), so any number of
// batches costs fixed memory and the result does not depend on how the data was batched.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/compress/quant/qparams.h"

namespace xtrain::compress {

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void observe(const at::Tensor& x) = 0;
  // The chosen [min, max] (before widening to include 0). Needs at least one observe().
  virtual std::pair<double, double> range() const = 0;
  virtual std::string name() const = 0;
  AffineQParams qparams() const;
  bool empty() const { return !seen_; }

 protected:
  void track(const at::Tensor& x);  // running min / max of everything seen
  bool seen_ = false;
  double min_ = 0.0, max_ = 0.0;
};

class MinMaxObserver : public Observer {
 public:
  void observe(const at::Tensor& x) override { track(x); }
  std::pair<double, double> range() const override;
  std::string name() const override { return "minmax"; }
};

// min/max <- min/max + c · (batch min/max - min/max), the first batch taken as is (PyTorch).
class MovingAverageMinMaxObserver : public Observer {
 public:
  explicit MovingAverageMinMaxObserver(double averaging_constant = 0.01) : c_(averaging_constant) {}
  void observe(const at::Tensor& x) override;
  std::pair<double, double> range() const override;
  std::string name() const override { return "moving_average_minmax"; }
  void reset_to(double min, double max);  // start QAT from a calibrated range

 private:
  double c_;
};

// The signed histogram both histogram observers use (public for tests).
class SignedHistogram {
 public:
  static constexpr int64_t kBins = 4096;
  void add(const at::Tensor& x);
  double radius() const { return radius_; }  // R: bins cover [-R, R]
  const std::vector<double>& counts() const { return counts_; }
  // The value below which `fraction` of all counts lie (linear inside a bin).
  double quantile(double fraction) const;
  // |x| folded: kBins/2 bins over [0, R].
  std::vector<double> folded() const;

 private:
  void grow_to(double amax);
  double radius_ = 0.0;
  std::vector<double> counts_;
};

class PercentileObserver : public Observer {
 public:
  explicit PercentileObserver(double percentile = 99.99);
  void observe(const at::Tensor& x) override;
  std::pair<double, double> range() const override;
  std::string name() const override { return "percentile"; }
  const SignedHistogram& histogram() const { return hist_; }

 private:
  double percentile_;
  SignedHistogram hist_;
};

class EntropyObserver : public Observer {
 public:
  void observe(const at::Tensor& x) override;
  std::pair<double, double> range() const override;
  std::string name() const override { return "entropy"; }
  const SignedHistogram& histogram() const { return hist_; }

 private:
  SignedHistogram hist_;
};

// TensorRT's entropy calibration on a histogram of |x| (`bins` over [0, R], R = bins.size() · width):
// the bin index i >= start whose clipped, `levels`-level re-quantised distribution has the smallest
// KL divergence from the clipped original (the last one on ties). Threshold = i · width.
int64_t entropy_threshold_bin(std::vector<double> bins, int64_t levels, int64_t start = 128);

// "minmax" | "percentile" | "entropy" (UsageError naming `key` otherwise).
std::unique_ptr<Observer> make_observer(const std::string& kind, double percentile, const std::string& key);

}  // namespace xtrain::compress
