// Multi-scale attention: the key-selection rules partition exactly (as partition_check.py), the
// dense masked reference equals tests/reference/gen_ms_attention.py (PyTorch, float64), and the
// fused CPU kernel equals the reference: forward and every gradient, fp32 (~1e-5), bf16 (~1e-2),
// fp64 (gradcheck by central differences), every ISA, with dropout (same hash mask), and dropout's
// statistics. Bad arguments name the argument and the value.
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/attention/attention_checks.h"
#include "kernels/ms_attention/ms_fixture_cases.h"
#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/cpu/tile_engine.h"
#include "xtrain/kernels/ms_attention/ms_attention_cpu.h"
#include "xtrain/kernels/ms_attention/ms_rules.h"
#include "xtrain/kernels/ms_attention/reference.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention::ms_attention_test {
namespace {

using xtrain::testing::AttentionResult;
using xtrain::testing::expect_close;
using xtrain::testing::expect_result;
using xtrain::testing::run_with_grads;

std::vector<int64_t> covered(const SegmentRange* r, int count, int64_t n) {
  std::vector<int64_t> out;
  for (int j = 0; j < count; ++j) {
    for (int64_t m = r[j].begin; m < r[j].end; ++m) {
      for (int64_t t = m << r[j].level; t < std::min((m + 1) << r[j].level, n); ++t) out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(MsRules, PartitionsExactly) {
  SegmentRange r[kMaxRanges];
  for (int64_t n : {1, 2, 3, 7, 8, 31, 100, 257}) {
    for (int64_t w : {1, 2, 3, 8, 16, 32}) {
      for (int64_t i = 0; i < n; ++i) {
        std::vector<int64_t> causal(i + 1), all(n);
        std::iota(causal.begin(), causal.end(), 0);
        std::iota(all.begin(), all.end(), 0);
        ASSERT_EQ(covered(r, causal_ranges(i, w, r), n), causal) << "causal n=" << n << " w=" << w << " i=" << i;
        const int count = bidirectional_ranges(i, n, w, r);
        ASSERT_EQ(covered(r, count, n), all) << "bidirectional n=" << n << " w=" << w << " i=" << i;
        for (int j = 0; j < count; ++j) ASSERT_LT(r[j].level, num_levels(n));
      }
    }
  }
}

TEST(MsRules, CausalQuerySeesAtMostWPlusOnePerLevel) {
  SegmentRange r[kMaxRanges];
  for (int64_t i = 0; i < 3000; i += 7) {
    const int count = causal_ranges(i, 16, r);
    for (int j = 0; j < count; ++j) EXPECT_LE(r[j].end - r[j].begin, 17) << "i=" << i << " level " << r[j].level;
  }
}

// The design page's split (numpy's array_split), written out: consecutive groups, the first NH mod S
// one head larger; its example 8 heads over [8, 16, 32] is 3, 3, 2.
TEST(MsWindows, HeadsSplitAsEvenlyAsPossible) {
  const auto sizes = [](int64_t NH, int64_t S) {
    std::vector<int64_t> out(static_cast<size_t>(S), 0);
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = group_of_head(h, NH, S);
      EXPECT_TRUE(h >= group_begin(g, NH, S) && h < group_begin(g + 1, NH, S)) << NH << "/" << S << " h=" << h;
      ++out[static_cast<size_t>(g)];
    }
    EXPECT_EQ(group_begin(S, NH, S), NH);
    return out;
  };
  EXPECT_EQ(sizes(8, 3), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(sizes(4, 3), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(sizes(5, 2), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(sizes(3, 3), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(sizes(6, 3), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(sizes(7, 4), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(window_of_head(1, 4, {8, 16, 32}), 8);
  EXPECT_EQ(window_of_head(2, 4, {8, 16, 32}), 16);
  EXPECT_EQ(window_of_head(3, 4, {8, 16, 32}), 32);
  EXPECT_NO_THROW(check_windows(4, {8, 16, 32}));
  EXPECT_THROW(check_windows(2, {8, 16, 32}), UsageError);
}

struct Case {
  std::string name;
  bool causal;
  std::vector<int64_t> windows;
  at::Tensor q, k, v, dout;
  AttentionResult expected;
};

std::vector<Case> fixture_cases(bool multiscale) {
  std::vector<Case> cases;
  for (const auto& f : xtrain::testing::load_ms_fixture_cases("ms_attention.pt")) {
    Case c;  // meta: [causal, B, NH, T, HS, windows...]
    c.name = f.name;
    c.causal = f.meta_at(0) != 0;
    c.windows = f.meta_from(5);
    if (c.windows.empty() == multiscale) continue;
    c.q = f.q;
    c.k = f.k;
    c.v = f.v;
    c.dout = f.dout;
    c.expected = f.expected;
    cases.push_back(c);
  }
  return cases;
}

TEST(MsReference, MatchesPyTorchFixture) {
  const auto cases = fixture_cases(true);
  ASSERT_EQ(cases.size(), 12u);  // 4 of them with heads not a multiple of the number of windows
  for (const auto& c : cases) {
    const auto got = run_with_grads(
        [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return ms_attention_reference(q, k, v, c.windows, c.causal);
        },
        c.q, c.k, c.v, c.dout);
    expect_result(got, c.expected, 1e-12, c.name);  // float64, same math, different op order
  }
}

TEST(MsFusedCpu, Float64MatchesPyTorchFixture) {
  for (const auto& c : fixture_cases(true)) {
    const auto got = run_with_grads(
        [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return ms_attention_cpu(q, k, v, c.windows, c.causal);
        },
        c.q, c.k, c.v, c.dout);
    expect_result(got, c.expected, 1e-11, c.name + " fused");  // float64, online softmax
  }
}

AttentionResult reference_f64(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                              const std::vector<int64_t>& windows, bool causal, double p = 0, uint64_t seed = 0) {
  return run_with_grads(
      [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return ms_attention_reference(a, b, c, windows, causal, p, seed);
      },
      q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), dout.to(at::kDouble));
}

AttentionResult fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                      const std::vector<int64_t>& windows, bool causal, double p = 0, uint64_t seed = 0) {
  return run_with_grads(
      [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return ms_attention_cpu(a, b, c, windows, causal, p, seed);
      },
      q, k, v, dout);
}

AttentionResult as_double(const AttentionResult& r) {
  return {r.out.to(at::kDouble), r.dq.to(at::kDouble), r.dk.to(at::kDouble), r.dv.to(at::kDouble)};
}

// n in {1, 2, w-1, w, w+1, 127, 1000}; one window and several; causal and bidirectional; B = 2.
TEST(MsFusedCpu, Float32MatchesReference) {
  torch::manual_seed(1);
  const std::vector<std::vector<int64_t>> window_sets = {{8}, {3, 8}};
  for (const auto& windows : window_sets) {
    for (int64_t n : {1, 2, 7, 8, 9, 127, 1000}) {
      if (n == 1000 && windows.size() == 1) continue;  // one n = 1000 run per direction is enough
      for (bool causal : {true, false}) {
        const int64_t NH = 2 * static_cast<int64_t>(windows.size());
        const auto q = at::randn({2, NH, n, 16}), k = at::randn({2, NH, n, 16}), v = at::randn({2, NH, n, 16});
        const auto dout = at::randn({2, NH, n, 16});
        const std::string what = "n=" + std::to_string(n) + " S=" + std::to_string(windows.size()) +
                                 (causal ? " causal" : " bidir");
        // fp32 accumulation over a few hundred keys: a few 1e-6 relative.
        expect_result(as_double(fused(q, k, v, dout, windows, causal)), reference_f64(q, k, v, dout, windows, causal),
                      1e-5, what);
      }
    }
  }
}

// Head counts that are not a multiple of the number of windows, windows short against n so every
// group's window changes the result: the README's default (4 heads over [8, 16, 32]), 5 over 2,
// one head per window.
TEST(MsFusedCpu, UnevenHeadSplitsMatchReference) {
  torch::manual_seed(9);
  const std::vector<std::pair<int64_t, std::vector<int64_t>>> splits = {{4, {8, 16, 32}}, {5, {3, 7}}, {3, {2, 5, 9}}};
  for (const auto& [NH, windows] : splits) {
    for (bool causal : {true, false}) {
      const auto q = at::randn({2, NH, 300, 16}), k = at::randn({2, NH, 300, 16}), v = at::randn({2, NH, 300, 16});
      const auto dout = at::randn({2, NH, 300, 16});
      const std::string what = "NH=" + std::to_string(NH) + " S=" + std::to_string(windows.size()) +
                               (causal ? " causal" : " bidir");
      expect_result(as_double(fused(q, k, v, dout, windows, causal)), reference_f64(q, k, v, dout, windows, causal),
                    1e-5, what);
    }
  }
}

TEST(MsFusedCpu, StridedInputsAndHeadSizesNotAMultipleOfTheVector) {
  torch::manual_seed(2);
  // q, k, v as views of one [B, T, 3, NH, HS] tensor, as MultiScaleAttention passes them; HS = 20.
  const auto qkv = at::randn({2, 45, 3, 4, 20}).permute({2, 0, 3, 1, 4});
  const auto dout = at::randn({2, 4, 45, 20});
  const auto q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
  expect_result(as_double(fused(q, k, v, dout, {4, 16}, true)), reference_f64(q, k, v, dout, {4, 16}, true), 1e-5,
                "strided");
}

TEST(MsFusedCpu, EveryIsaMatchesReference) {
  torch::manual_seed(3);
  const auto q = at::randn({1, 2, 150, 32}), k = at::randn({1, 2, 150, 32}), v = at::randn({1, 2, 150, 32});
  const auto dout = at::randn({1, 2, 150, 32});
  const auto expected = reference_f64(q, k, v, dout, {5, 16}, true);
  using attention::cpu::Isa;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (static_cast<int>(isa) > static_cast<int>(attention::cpu::best_isa())) continue;
    const Isa before = attention::cpu::force_isa(isa);
    expect_result(as_double(fused(q, k, v, dout, {5, 16}, true)), expected, 1e-5, attention::cpu::isa_name(isa));
    attention::cpu::force_isa(before);
  }
}

// Two threads: the backward splits heads into chunks with private dK/dV rows (B·NH = 2 < 4 threads'
// worth of work), then reduces them; one head (B = 1, NH = 1) gives the largest number of chunks.
TEST(MsFusedCpu, MultiThreadedChunksMatchReference) {
  torch::manual_seed(8);
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  for (int64_t NH : {1, 2}) {
    const auto q = at::randn({1, NH, 333, 16}), k = at::randn({1, NH, 333, 16}), v = at::randn({1, NH, 333, 16});
    const auto dout = at::randn({1, NH, 333, 16});
    const std::vector<int64_t> windows = NH == 1 ? std::vector<int64_t>{6} : std::vector<int64_t>{3, 9};
    for (bool causal : {true, false}) {
      expect_result(as_double(fused(q, k, v, dout, windows, causal, 0.1, 5)),
                    reference_f64(q, k, v, dout, windows, causal, 0.1, 5), 1e-5,
                    "threads=2 NH=" + std::to_string(NH) + (causal ? " causal" : " bidir"));
    }
  }
  at::set_num_threads(before);
}

TEST(MsFusedCpu, BFloat16WithinOnePercent) {
  torch::manual_seed(4);
  for (bool causal : {true, false}) {
    const auto q = at::randn({2, 4, 200, 32}).to(at::kBFloat16), k = at::randn({2, 4, 200, 32}).to(at::kBFloat16);
    const auto v = at::randn({2, 4, 200, 32}).to(at::kBFloat16), dout = at::randn({2, 4, 200, 32});
    const auto got = fused(q, k, v, dout.to(at::kBFloat16), {8, 16}, causal);
    EXPECT_EQ(got.out.scalar_type(), at::kBFloat16);
    EXPECT_EQ(got.dk.scalar_type(), at::kBFloat16);
    // Inputs are the same bf16 values; the error is the bf16 rounding of outputs and dout: ~4e-3.
    expect_result(as_double(got), reference_f64(q, k, v, dout.to(at::kBFloat16), {8, 16}, causal), 1e-2,
                  causal ? "bf16 causal" : "bf16 bidir");
  }
}

TEST(MsFusedCpu, GradcheckFloat64) {
  torch::manual_seed(5);
  struct Shape {
    int64_t n;
    std::vector<int64_t> windows;
    bool causal;
    int64_t NH;
  };
  // n = 1, n < w, n not a multiple of any window, two windows, both directions; 3 heads over 2
  // windows and 4 over 3 (uneven groups).
  for (const auto& s : std::vector<Shape>{{1, {4}, true, 1},
                                          {3, {4}, false, 1},
                                          {11, {2, 3}, true, 2},
                                          {11, {3, 2}, false, 2},
                                          {11, {2, 3}, true, 3},
                                          {9, {1, 2, 4}, false, 4}}) {
    const int64_t NH = s.NH;
    const auto opts = at::TensorOptions().dtype(at::kDouble);
    const auto q = at::randn({1, NH, s.n, 3}, opts), k = at::randn({1, NH, s.n, 3}, opts);
    const auto v = at::randn({1, NH, s.n, 3}, opts);
    xtrain::testing::gradcheck(
        [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
          return ms_attention_cpu(a, b, c, s.windows, s.causal);
        },
        q, k, v, "n=" + std::to_string(s.n));
  }
}

TEST(MsFusedCpu, DropoutEqualsReferenceWithTheSameMask) {
  torch::manual_seed(6);
  for (bool causal : {true, false}) {
    const auto q = at::randn({2, 2, 70, 8}), k = at::randn({2, 2, 70, 8}), v = at::randn({2, 2, 70, 8});
    const auto dout = at::randn({2, 2, 70, 8});
    expect_result(as_double(fused(q, k, v, dout, {4, 8}, causal, 0.3, 1234)),
                  reference_f64(q, k, v, dout, {4, 8}, causal, 0.3, 1234), 1e-5, "dropout");
  }
}

// v = one-hot rows (HS = T): o_i[t] * size(segment of t) is that segment's weight after dropout, so
// the kept weights are p/(1-drop) and the dropped fraction is the drop probability.
TEST(MsFusedCpu, DropoutStatistics) {
  const int64_t n = 64;
  const double drop = 0.25;
  torch::manual_seed(7);
  const auto q = at::randn({1, 4, n, n}) * 0.3, k = at::randn({1, 4, n, n}) * 0.3;
  const auto v = at::eye(n).expand({1, 4, n, n}).contiguous();
  const auto clean = ms_attention_cpu(q, k, v, {4}, true);
  int64_t kept = 0, total = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const auto noisy = ms_attention_cpu(q, k, v, {4}, true, drop, seed);
    const auto nonzero = clean.abs() > 1e-12;
    const auto ratio = noisy.masked_select(nonzero) / clean.masked_select(nonzero);
    // Each weight is dropped (0) or scaled by 1/(1 - p), never anything else.
    const auto is_zero = ratio.abs() < 1e-5, is_scaled = (ratio - 1.0 / (1.0 - drop)).abs() < 1e-4;
    EXPECT_TRUE(is_zero.logical_or(is_scaled).all().item<bool>());
    kept += is_scaled.sum().item<int64_t>();
    total += ratio.numel();
  }
  const double dropped = 1.0 - static_cast<double>(kept) / static_cast<double>(total);
  // Positions of one segment share its weight, so count positions: ~5000 per seed; 3 sigma < 0.01.
  EXPECT_NEAR(dropped, drop, 0.02) << "dropped fraction over " << total << " positions";
}

TEST(MsFusedCpu, BadArgumentsNameTheArgument) {
  const auto x = at::randn({1, 4, 10, 8});
  const auto expect_error = [](const std::function<void()>& f, const std::vector<std::string>& words) {
    try {
      f();
      ADD_FAILURE() << "no UsageError";
    } catch (const UsageError& e) {
      for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  expect_error([&] { ms_attention_cpu(x, x, x, {1, 2, 3, 4, 5}, true); },
               {"heads (4)", "[1, 2, 3, 4, 5]", "xtrain.model.heads", "xtrain.model.attention.windows"});
  expect_error([&] { ms_attention_cpu(x, x, x, {8, 0}, true); }, {"windows[1] = 0", "xtrain.model.attention.windows"});
  expect_error([&] { ms_attention_cpu(x, x, x, {}, true); }, {"at least one window"});
  expect_error([&] { ms_attention_cpu(x.select(0, 0), x.select(0, 0), x.select(0, 0), {8}, true); },
               {"[B, NH, T, HS]", "[4, 10, 8]"});
  expect_error([&] { ms_attention_cpu(x, x.narrow(2, 0, 5), x, {8}, true); }, {"one shape", "[1, 4, 5, 8]"});
  expect_error([&] { ms_attention_cpu(x.to(at::kHalf), x.to(at::kHalf), x.to(at::kHalf), {8}, true); },
               {"dtype", "Half"});
  expect_error([&] { ms_attention_cpu(x, x, x, {8}, true, 1.5); }, {"dropout", "1.5"});
}

}  // namespace
}  // namespace xtrain::kernels::ms_attention::ms_attention_test
