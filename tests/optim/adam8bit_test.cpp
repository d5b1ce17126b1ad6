// 8-bit optimizer state (optim/cpu/quant8.h, optim/adam8bit.h) against float64 references written
// here from bitsandbytes' create_dynamic_map formula: the code books, the block-wise round trip
// (each value within half the spacing of its two neighbouring codes, times the block's absmax) on
// zeros, subnormal, tiny and huge values, a one-value block and the last partial block; one fused
// step of the kernel over segments of two groups with a gap, against the same step in float64;
// and the config: state_dtype checked by name, refused with other optimizers.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "support/errors.h"
#include "xtrain/config/config.h"
#include "xtrain/optim/adam8bit.h"
#include "xtrain/optim/cpu/quant8.h"
#include "xtrain/optim/registry.h"

namespace xtrain::adam8bit_test {
namespace {

using optim::cpu::kQuantBlock;

// bitsandbytes' create_dynamic_map(signed, 7, 8) in float64: exponents 10^-6..10^0, each with the
// midpoints of linspace(0.1, 1, k + 1), k = 2^i (signed: both signs) or 2^(i+1); plus 0 and 1.
std::vector<double> reference_map(bool is_signed) {
  std::vector<double> v{0.0, 1.0};
  for (int i = 0; i <= 6; ++i) {
    const int k = is_signed ? 1 << i : 1 << (i + 1);
    for (int j = 0; j < k; ++j) {
      const double mid = 0.1 + 0.9 * (j + 0.5) / k;
      v.push_back(std::pow(10.0, i - 6) * mid);
      if (is_signed) v.push_back(-std::pow(10.0, i - 6) * mid);
    }
  }
  std::sort(v.begin(), v.end());
  return v;
}

// The codes on either side of t (both the end code beyond the map's range).
std::pair<double, double> neighbours(const std::vector<double>& map, double t) {
  auto hi = std::lower_bound(map.begin(), map.end(), t);
  if (hi == map.end()) return {map.back(), map.back()};
  if (hi == map.begin() || *hi == t) return {*hi, *hi};
  return {*(hi - 1), *hi};
}

// `got` (dequantised in fp32 with fp32 `absmax`) is one of the two codes next to x/absmax, and
// within half their spacing (times absmax) of x.
void expect_quantised(const std::vector<double>& map, double x, double absmax, float absmax_f, float got,
                      const std::string& what) {
  if (absmax == 0) {
    EXPECT_EQ(got, 0.f) << what;
    return;
  }
  const auto [lo, hi] = neighbours(map, x / absmax);
  const float lo_f = static_cast<float>(lo) * absmax_f, hi_f = static_cast<float>(hi) * absmax_f;
  EXPECT_TRUE(got == lo_f || got == hi_f) << what << ": x " << x << " -> " << got << ", codes " << lo_f << " / " << hi_f;
  // One neighbour: x/absmax is a code, or below the signed map's lowest code (-0.99296875).
  const double spacing = lo == hi ? std::abs(x - lo * absmax) : (hi - lo) / 2 * absmax;
  EXPECT_LE(std::abs(got - x), spacing + std::max(std::abs(x), absmax) * 1e-6 + 1e-45) << what << ": x " << x;
}

void check_round_trip(bool is_signed, const std::vector<float>& x, const std::string& what) {
  const auto map = reference_map(is_signed);
  const int64_t n = static_cast<int64_t>(x.size()), blocks = optim::cpu::quant_blocks(n);
  std::vector<uint8_t> codes(n);
  std::vector<float> absmax(blocks), y(n);
  optim::cpu::quantize_blockwise(is_signed, x.data(), n, codes.data(), absmax.data());
  optim::cpu::dequantize_blockwise(is_signed, codes.data(), absmax.data(), n, y.data());
  for (int64_t b = 0; b < blocks; ++b) {
    double a = 0;
    for (int64_t i = b * kQuantBlock; i < std::min(n, (b + 1) * kQuantBlock); ++i) a = std::max(a, std::abs(double(x[i])));
    ASSERT_EQ(absmax[b], static_cast<float>(a)) << what << " block " << b;
    for (int64_t i = b * kQuantBlock; i < std::min(n, (b + 1) * kQuantBlock); ++i) {
      expect_quantised(map, x[i], a, absmax[b], y[i], what + " element " + std::to_string(i));
    }
  }
}

TEST(Adam8bit, CodeBooksAreBitsandbytesDynamicMaps) {
  for (bool s : {true, false}) {
    const auto ref = reference_map(s);
    const auto& map = optim::cpu::dynamic_map(s);
    ASSERT_EQ(ref.size(), 256u);
    for (int j = 0; j < 256; ++j) EXPECT_EQ(map[j], static_cast<float>(ref[j])) << (s ? "signed " : "unsigned ") << j;
  }
  // Spot values of the formula: the extreme codes and the smallest non-zero one.
  EXPECT_FLOAT_EQ(optim::cpu::dynamic_map(true)[0], -0.99296875f);
  EXPECT_EQ(optim::cpu::dynamic_map(true)[255], 1.f);
  EXPECT_EQ(optim::cpu::dynamic_map(false)[0], 0.f);
  EXPECT_FLOAT_EQ(optim::cpu::dynamic_map(false)[1], 3.25e-7f);
}

TEST(Adam8bit, QuantiseRoundTripWithinTheMapSpacing) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(2 * kQuantBlock + 37);  // two whole blocks and a partial one
  for (auto& v : x) v = normal(rng);
  x[5] = 1e30f;    // a huge value: the rest of its block falls to the smallest codes or zero
  x[9] = -1e-30f;  // tiny next to it
  for (int64_t i = kQuantBlock; i < kQuantBlock + 100; ++i) x[i] = 0.f;
  x[2 * kQuantBlock + 3] = -3e-40f;  // a subnormal in the last block
  for (bool s : {true, false}) {
    auto in = x;
    if (!s) {
      for (auto& v : in) v = std::abs(v);
    }
    const std::string kind = s ? "signed" : "unsigned";
    check_round_trip(s, in, kind + " mixed");
    check_round_trip(s, {s ? -2.5f : 2.5f}, kind + " one value");
    check_round_trip(s, std::vector<float>(kQuantBlock + 1, 0.f), kind + " zeros");
    check_round_trip(s, std::vector<float>(300, 1e-41f), kind + " subnormal block");
    check_round_trip(s, std::vector<float>(kQuantBlock, 3e38f), kind + " near float max");
  }
  // A block of one repeated positive value is exact (its absmax is the code 1.0).
  std::vector<float> same(kQuantBlock, 0.37f), back(kQuantBlock);
  std::vector<uint8_t> codes(kQuantBlock);
  float absmax = 0;
  optim::cpu::quantize_blockwise(false, same.data(), kQuantBlock, codes.data(), &absmax);
  optim::cpu::dequantize_blockwise(false, codes.data(), &absmax, kQuantBlock, back.data());
  EXPECT_EQ(back, same);
}

// One fused step against float64: dequantise, Adam in double, requantise.
TEST(Adam8bit, FusedStepMatchesFloat64ReferenceOverGroupsAndGaps) {
  const int64_t n = 2 * kQuantBlock + 300, blocks = optim::cpu::quant_blocks(n);
  optim::AdamParams ap;
  ap.betas = {0.9, 0.95};
  ap.eps = 1e-8;
  optim::Adam8bit opt(ap, /*decoupled=*/true, "AdamW");
  opt.init_state(n);
  opt.set_step_count(4);
  auto st = opt.state();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> m0(n), v0(n), p0(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    m0[i] = 0.01f * normal(rng);
    v0[i] = 1e-4f * normal(rng) * normal(rng);
    v0[i] = std::abs(v0[i]);
    p0[i] = normal(rng);
    g[i] = 0.02f * normal(rng);
  }
  optim::cpu::quantize_blockwise(true, m0.data(), n, st[0].second.data_ptr(), st[2].second.data_ptr<float>());
  optim::cpu::quantize_blockwise(false, v0.data(), n, st[1].second.data_ptr(), st[3].second.data_ptr<float>());
  // The state as the step sees it: dequantised in fp32.
  std::vector<float> m_in(n), v_in(n);
  optim::cpu::dequantize_blockwise(true, st[0].second.data_ptr(), st[2].second.data_ptr<float>(), n, m_in.data());
  optim::cpu::dequantize_blockwise(false, st[1].second.data_ptr(), st[3].second.data_ptr<float>(), n, v_in.data());

  const std::vector<optim::Segment> segments{{0, 1000, 0, 0}, {1000, 1500, 1, 1}, {2600, n - 2600, 0, 2}};
  optim::StepInputs in;
  in.params = at::from_blob(p0.data(), {n}, at::kFloat).clone();
  in.grads = at::from_blob(g.data(), {n}, at::kFloat).clone();
  in.segments = &segments;
  in.groups = {{1e-3, 0.1}, {3e-3, 0.0}};
  opt.step(in);
  EXPECT_EQ(opt.step_count(), 5);

  // float64 reference of step 5.
  const double b1 = 0.9, b2 = 0.95, bc1 = 1 - std::pow(b1, 5), bc2 = 1 - std::pow(b2, 5);
  std::vector<double> m(m_in.begin(), m_in.end()), v(v_in.begin(), v_in.end()), p(p0.begin(), p0.end());
  for (const auto& s : segments) {
    const auto& h = in.groups[s.group];
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * double(g[i]) * g[i];
      p[i] = p[i] * (1 - h.lr * h.weight_decay) - h.lr / bc1 * m[i] / (std::sqrt(v[i] / bc2) + 1e-8);
    }
  }
  const float* pout = in.params.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(pout[i], p[i], 2e-6 * std::abs(p[i]) + 1e-7) << "parameter " << i;
  }
  EXPECT_EQ(pout[2500], p0[2500]) << "the gap between segments is not stepped";
  std::vector<float> m_out(n), v_out(n);
  optim::cpu::dequantize_blockwise(true, st[0].second.data_ptr(), st[2].second.data_ptr<float>(), n, m_out.data());
  optim::cpu::dequantize_blockwise(false, st[1].second.data_ptr(), st[3].second.data_ptr<float>(), n, v_out.data());
  const auto smap = reference_map(true), umap = reference_map(false);
  for (int64_t b = 0; b < blocks; ++b) {
    double am = 0, av = 0;
    for (int64_t i = b * kQuantBlock; i < std::min(n, (b + 1) * kQuantBlock); ++i) {
      am = std::max(am, std::abs(m[i]));
      av = std::max(av, v[i]);
    }
    EXPECT_NEAR(st[2].second.data_ptr<float>()[b], am, am * 1e-6) << "exp_avg absmax of block " << b;
    EXPECT_NEAR(st[3].second.data_ptr<float>()[b], av, av * 1e-6) << "exp_avg_sq absmax of block " << b;
    for (int64_t i = b * kQuantBlock; i < std::min(n, (b + 1) * kQuantBlock); i += 7) {
      const auto [ml, mh] = neighbours(smap, m[i] / am);
      EXPECT_LE(std::abs(m_out[i] - m[i]), (mh - ml) / 2 * am + 1e-6 * am) << "exp_avg " << i;
      const auto [vl, vh] = neighbours(umap, v[i] / av);
      EXPECT_LE(std::abs(v_out[i] - v[i]), (vh - vl) / 2 * av + 1e-6 * av) << "exp_avg_sq " << i;
    }
  }
}

config::Loaded load(const std::string& optimizer) {
  config::LoadOptions lo;
  lo.quiet = true;
  return config::load_text(R"({"train_micro_batch_size_per_gpu": 2, "optimizer": )" + optimizer + "}", lo);
}

TEST(Adam8bit, StateDtypeIsCheckedAndRefusedWithOtherOptimizers) {
  const auto ok = load(R"({"type": "AdamW", "params": {"state_dtype": "int8"}})");
  EXPECT_EQ(ok.config.optimizer.adam.state_dtype, "int8");
  auto opt = optim::make_optimizer(ok.config.optimizer);
  opt->init_state(5000);
  const auto st = opt->state();
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[0].second.scalar_type(), at::kChar);
  EXPECT_EQ(st[1].second.scalar_type(), at::kByte);
  EXPECT_EQ(st[2].second.numel(), 3);  // ceil(5000 / 2048) absmax per moment
  EXPECT_TRUE(optim::state_is_blockwise(st, 5000));

  auto bad = testing::expect_usage_error([] { load(R"({"type": "Adam", "params": {"state_dtype": "int4"}})"); });
  EXPECT_NE(bad.find("optimizer.params.state_dtype"), std::string::npos) << bad;
  for (const char* type : {"Lamb", "SGD"}) {
    auto e = testing::expect_usage_error(
        [&] { load(std::string(R"({"type": ")") + type + R"(", "params": {"state_dtype": "int8"}})"); });
    EXPECT_NE(e.find("optimizer.params.state_dtype"), std::string::npos) << e;
    EXPECT_NE(e.find("not supported yet"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace xtrain::adam8bit_test
