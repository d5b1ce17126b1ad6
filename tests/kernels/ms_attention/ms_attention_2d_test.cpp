// 2-D multi-scale attention (docs/design/multiscale-attention-2d.md): the rule in ms_rules_2d.h
// partitions every grid exactly and matches the design's measured key counts, and the dense masked
// reference equals tests/reference/gen_ms_attention_2d.py (PyTorch float64, one query at a time
// with partition_check_2d.py's rule) on grids 1x1, 1x5, 3x4, 7x7 with and without a class token:
// output and every gradient. Bad shapes name the grid and the token count.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/attention/attention_checks.h"
#include "kernels/ms_attention/ms_fixture_cases.h"
#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/kernels/ms_attention/ms_rules_2d.h"
#include "xtrain/kernels/ms_attention/reference_2d.h"

namespace xtrain::kernels::ms_attention::ms_attention_2d_test {
namespace {

using xtrain::testing::AttentionResult;
using xtrain::testing::expect_result;
using xtrain::testing::run_with_grads;

// How often each patch is covered by the blocks query (r, c) sees, and how many blocks that is.
std::vector<int> coverage(int64_t r, int64_t c, int64_t gh, int64_t gw, int64_t w, int* keys) {
  std::vector<int> hits(static_cast<size_t>(gh * gw), 0);
  *keys = 0;
  for_each_level_2d(r, c, gh, gw, w, [&](int l, AxisSpan rows, AxisSpan cols, AxisSpan prows, AxisSpan pcols) {
    const int64_t z = int64_t{1} << l;
    for (int64_t a = rows.s / z; a < up(rows.f, z) / z; ++a) {
      for (int64_t b = cols.s / z; b < up(cols.f, z) / z; ++b) {
        if (l > 0 && block_in_span(a, l, gh, prows) && block_in_span(b, l, gw, pcols)) continue;
        ++*keys;
        for (int64_t y = a * z; y < std::min((a + 1) * z, gh); ++y) {
          for (int64_t x = b * z; x < std::min((b + 1) * z, gw); ++x) ++hits[static_cast<size_t>(y * gw + x)];
        }
      }
    }
    EXPECT_LT(l, num_levels_2d(gh, gw));
  });
  return hits;
}

TEST(MsRules2d, PartitionsEveryGridExactly) {
  for (auto g : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 5}, {5, 1}, {2, 3}, {3, 4}, {7, 7}, {7, 9},
                                                         {16, 16}, {13, 28}}) {
    for (int64_t w : {1, 2, 3, 4, 8}) {
      for (int64_t p = 0; p < g.first * g.second; ++p) {
        int keys = 0;
        const auto hits = coverage(p / g.second, p % g.second, g.first, g.second, w, &keys);
        for (size_t j = 0; j < hits.size(); ++j) {
          ASSERT_EQ(hits[j], 1) << g.first << "x" << g.second << " w=" << w << " query " << p << " patch " << j;
        }
      }
    }
  }
}

// The design page's measurement (partition_check_2d.py): on 28x28 a query sees at most 124 keys
// with w = 4 and 82 with w = 2.
TEST(MsRules2d, MostKeysOn28x28AsMeasuredByTheDesign) {
  for (auto [w, expected] : std::vector<std::pair<int64_t, int>>{{4, 124}, {2, 82}}) {
    int most = 0;
    for (int64_t p = 0; p < 28 * 28; ++p) {
      int keys = 0;
      coverage(p / 28, p % 28, 28, 28, w, &keys);
      most = std::max(most, keys);
    }
    EXPECT_EQ(most, expected) << "w=" << w;
  }
}

TEST(MsReference2d, MaskShapeAndClassToken) {
  const auto m = visibility_mask_2d(3, 4, 2, true);  // levels: 12 + 4 + 1 blocks, then the class key
  ASSERT_EQ(m.sizes(), (at::IntArrayRef{13, 18}));
  EXPECT_EQ(m[0].narrow(0, 0, 12).sum().item<int64_t>(), 12);  // the class query: every patch ...
  EXPECT_EQ(m[0].narrow(0, 12, 5).sum().item<int64_t>(), 0);   // ... no pooled block ...
  EXPECT_TRUE(m[0][17].item<bool>());                           // ... and itself
  for (int64_t t = 1; t < 13; ++t) EXPECT_TRUE(m[t][17].item<bool>()) << "patch query " << t;
  const auto sizes = key_log_sizes_2d(3, 4, true, at::empty({0}, at::kDouble)).exp();
  EXPECT_EQ(sizes.sum().item<double>(), 12 * 3 + 1);  // each level covers the grid once; class: 1
}

struct Case2d {
  std::string name;
  bool cls;
  int64_t gh, gw;
  std::vector<int64_t> windows;
  at::Tensor q, k, v, dout;
  AttentionResult expected;
};

std::vector<Case2d> fixture_cases_2d() {
  std::vector<Case2d> cases;
  for (const auto& f : xtrain::testing::load_ms_fixture_cases("ms_attention_2d.pt")) {
    Case2d c;  // meta: [cls, B, NH, gh, gw, HS, windows...]
    c.name = f.name;
    c.cls = f.meta_at(0) != 0;
    c.gh = f.meta_at(3);
    c.gw = f.meta_at(4);
    c.windows = f.meta_from(6);
    c.q = f.q;
    c.k = f.k;
    c.v = f.v;
    c.dout = f.dout;
    c.expected = f.expected;
    cases.push_back(c);
  }
  return cases;
}

TEST(MsReference2d, MatchesPyTorchPerQueryFixture) {
  const auto cases = fixture_cases_2d();
  ASSERT_EQ(cases.size(), 8u);  // 1x1, 1x5, 3x4, 7x7, each with and without a class token
  for (const auto& c : cases) {
    const auto got = run_with_grads(
        [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return ms_attention_2d_reference(q, k, v, c.windows, c.gh, c.gw, c.cls);
        },
        c.q, c.k, c.v, c.dout);
    expect_result(got, c.expected, 1e-12, c.name);  // float64, same math, different op order
  }
}

TEST(MsReference2d, WrongTokenCountNamesTheGrid) {
  const auto x = at::randn({1, 2, 12, 4}, at::kDouble);
  EXPECT_NO_THROW(ms_attention_2d_reference(x, x, x, {2}, 3, 4, false));
  try {
    ms_attention_2d_reference(x, x, x, {2}, 3, 4, true);
    FAIL() << "12 tokens accepted for a 3x4 grid plus a class token";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("3x4 plus a class token needs 13 tokens, got 12"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ms_attention_2d_reference(x, x, x, {2, 4, 8}, 3, 4, false), UsageError);  // 2 heads, 3 windows
}

}  // namespace
}  // namespace xtrain::kernels::ms_attention::ms_attention_2d_test
