// Quantisation arithmetic against PyTorch 1.13 (tests/reference/gen_quant.py -> fixtures/quant.pt):
// per-channel int8 weights (PerChannelMinMaxObserver + torch.quantize_per_channel), uint8
// activation observers (MinMax, MovingAverageMinMax), torch.quantize_per_tensor, fake quantisation
// forward and straight-through gradient, the percentile observer against torch.quantile and the
// entropy (KL) threshold against an independent torch implementation of TensorRT's search.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/compress/quant/fake_quant.h"
#include "xtrain/compress/quant/observer.h"
#include "xtrain/compress/quant/qparams.h"

namespace xtrain::compress::quant_test {
namespace {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;

const std::map<std::string, at::Tensor>& fx() {
  static const auto t = xtrain::testing::load_tensors("quant.pt");
  return t;
}
const at::Tensor& f(const std::string& key) {
  const auto it = fx().find(key);
  TORCH_CHECK(it != fx().end(), "quant.pt has no ", key);
  return it->second;
}

TEST(Quant, PerChannelWeightsMatchTorchQuantizePerChannel) {
  for (const std::string name : {"w.linear", "w.conv"}) {
    const auto q = quantize_per_channel(f(name));
    // Same float32 formula (amax / 127.5, eps floor): bit-identical scales, codes and values.
    expect_equal(q.scale, f(name + ".scale"), name + " scale");
    expect_equal(q.q, f(name + ".q"), name + " int8");
    expect_equal(dequantize_per_channel(q), f(name + ".dq"), name + " dequantised");
  }
}

TEST(Quant, MinMaxObserverMatchesTorch) {
  MinMaxObserver obs;
  for (int i = 0; i < 3; ++i) obs.observe(f("act.batch" + std::to_string(i)));
  const auto [lo, hi] = obs.range();
  EXPECT_EQ(static_cast<float>(lo), f("act.minmax.min").item<float>());
  EXPECT_EQ(static_cast<float>(hi), f("act.minmax.max").item<float>());
  const auto qp = obs.qparams();
  EXPECT_EQ(qp.scale, f("act.minmax.scale").item<float>());
  EXPECT_EQ(qp.zero_point, f("act.minmax.zero_point").item<int64_t>());
  expect_equal(quantize_per_tensor(f("act.batch1"), qp), f("act.q"), "quantize_per_tensor");
  // Round trip: every value inside the range comes back within half a step.
  const auto back = dequantize_per_tensor(quantize_per_tensor(f("act.batch1"), qp), qp);
  expect_close(back, f("act.batch1"), 0, qp.scale * 0.5 + 1e-6, "round trip (half a step)");
}

TEST(Quant, MovingAverageObserverMatchesTorch) {
  MovingAverageMinMaxObserver obs(0.01);
  for (int i = 0; i < 3; ++i) obs.observe(f("act.batch" + std::to_string(i)));
  const auto [lo, hi] = obs.range();
  // PyTorch updates in float32, we in double: a few float32 ulps apart.
  EXPECT_NEAR(lo, f("act.moving.min").item<double>(), 1e-5);
  EXPECT_NEAR(hi, f("act.moving.max").item<double>(), 1e-5);
  const auto qp = obs.qparams();
  EXPECT_NEAR(qp.scale, f("act.moving.scale").item<float>(), 1e-7);
  EXPECT_EQ(qp.zero_point, f("act.moving.zero_point").item<int64_t>());
}

TEST(Quant, FakeQuantPerTensorForwardAndStraightThroughGradient) {
  const auto x = f("fq.x").clone().requires_grad_();
  const auto y = fake_quantize_per_tensor(x, 0.05f, 37, 0, 255);
  y.backward(f("fq.grad_out"));
  // Same rounding of x·(1/s) in float32, then (q − z)·s: identical values.
  expect_close(y.detach(), f("fq.y"), 0, 1e-7, "fake_quantize_per_tensor_affine");
  expect_equal(x.grad(), f("fq.grad"), "straight-through gradient (zero where clamped)");
}

TEST(Quant, FakeQuantPerChannelForwardAndStraightThroughGradient) {
  const auto w = f("fqc.w").clone().requires_grad_();
  const auto y = fake_quantize_per_channel(w, f("fqc.scale"), -128, 127);
  y.backward(f("fqc.grad_out"));
  expect_close(y.detach(), f("fqc.y"), 0, 1e-7, "fake_quantize_per_channel_affine");
  expect_equal(w.grad(), f("fqc.grad"), "straight-through gradient (zero where clamped)");
}

TEST(Quant, PercentileObserverMatchesTorchQuantileToOneBin) {
  std::vector<at::Tensor> parts;
  for (int i = 0; i < 3; ++i) parts.push_back(f("act.batch" + std::to_string(i)).reshape({-1}));
  const auto sorted = std::get<0>(at::sort(at::cat(parts).to(at::kDouble)));
  const int64_t n = sorted.numel();
  for (const double p : {99.0, 99.9}) {
    PercentileObserver obs(p);
    for (int i = 0; i < 3; ++i) obs.observe(f("act.batch" + std::to_string(i)));
    const auto [lo, hi] = obs.range();
    // The histogram (4096 bins over [-R, R], R = 7.5) locates a quantile to within one bin of the
    // order statistics around it; torch.quantile interpolates between those two, which in a sparse
    // tail can be bins apart: allow one bin plus that gap.
    const double bin = 2 * obs.histogram().radius() / SignedHistogram::kBins;
    auto gap = [&](double q) {
      const auto k = static_cast<int64_t>(std::floor(q * (n - 1)));
      return sorted[std::min(k + 1, n - 1)].item<double>() - sorted[k].item<double>();
    };
    const auto key = "percentile." + std::string(p == 99.0 ? "99.0" : "99.9");
    EXPECT_NEAR(lo, f(key + ".lo").item<double>(), bin + gap(1 - p / 100)) << key;
    EXPECT_NEAR(hi, f(key + ".hi").item<double>(), bin + gap(p / 100)) << key;
  }
}

TEST(Quant, EntropyThresholdMatchesIndependentReference) {
  // Through the observer: batch 0 holds the largest |x|, so the histogram's R is the fixture's.
  EntropyObserver obs;
  for (int i = 0; i < 3; ++i) obs.observe(f("act.batch" + std::to_string(i)));
  EXPECT_DOUBLE_EQ(obs.histogram().radius(), f("entropy.radius").item<double>());
  const auto bins = obs.histogram().folded();
  EXPECT_EQ(entropy_threshold_bin(bins, 128), f("entropy.bin_signed").item<int64_t>());
  const double threshold = f("entropy.bin_signed").item<double>() * f("entropy.radius").item<double>() / bins.size();
  const auto [lo, hi] = obs.range();
  // The threshold, clipped to the data's own range (it never widens the min-max range).
  EXPECT_NEAR(hi, std::min(threshold, f("act.minmax.max").item<double>()), 1e-6);
  EXPECT_NEAR(lo, std::max(-threshold, f("act.minmax.min").item<double>()), 1e-6);

  // Non-negative data (256 levels): the folded histogram built here the way the generator does.
  std::vector<at::Tensor> parts;
  for (int i = 0; i < 3; ++i) parts.push_back(f("act.batch" + std::to_string(i)).reshape({-1}).relu());
  const auto relu = at::cat(parts);
  const double r = f("entropy.relu_radius").item<double>();
  const auto h = at::histc(relu, SignedHistogram::kBins, -r, r).to(at::kDouble);
  const auto folded = (h.narrow(0, SignedHistogram::kBins / 2, SignedHistogram::kBins / 2) +
                       h.narrow(0, 0, SignedHistogram::kBins / 2).flip({0})).contiguous();
  std::vector<double> v(folded.data_ptr<double>(), folded.data_ptr<double>() + folded.numel());
  EXPECT_EQ(entropy_threshold_bin(v, 256), f("entropy.bin_relu").item<int64_t>());
}

TEST(Quant, AffineQParamsIncludeZeroAndFloorTheScale) {
  // Closed forms: [2, 5] widens to [0, 5] (zero point 0); a constant-zero range gets eps.
  const auto a = choose_affine_qparams(2.0, 5.0);
  EXPECT_FLOAT_EQ(a.scale, 5.0f / 255.0f);
  EXPECT_EQ(a.zero_point, 0);
  const auto b = choose_affine_qparams(0.0, 0.0);
  EXPECT_EQ(b.scale, std::numeric_limits<float>::epsilon());
  EXPECT_EQ(b.zero_point, 0);
  const auto c = choose_affine_qparams(-3.0, -1.0);  // widened to [-3, 0]: zero point at the top
  EXPECT_EQ(c.zero_point, 255);
}

}  // namespace
}  // namespace xtrain::compress::quant_test
