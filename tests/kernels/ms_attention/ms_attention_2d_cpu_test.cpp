// The fused 2-D multi-scale CPU kernel (ms2d_fused_cpu) equals the dense masked reference
// (reference_2d.h, itself equal to gen_ms_attention_2d.py): forward and every gradient through its
// analytic backward, float64 at 1e-11 on square, non-square and non-power-of-two grids with and
// without a class token and several window lists; fp32 (~1e-5), bf16 (~1e-2), every ISA, two
// threads (chunked dK/dV), float64 central differences, and dropout against the reference with the
// same hash mask. The registry routes 2-D calls to it and refuses 1-D kernels for them.
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention/attention_checks.h"
#include "kernels/ms_attention/ms_fixture_cases.h"
#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/cpu/tile_engine.h"
#include "xtrain/kernels/attention/dense_reference.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/ms_attention/ms_attention_2d_cpu.h"
#include "xtrain/kernels/ms_attention/ms_rules_2d.h"
#include "xtrain/kernels/ms_attention/reference_2d.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention::ms_attention_2d_cpu_test {
namespace {

using xtrain::testing::AttentionResult;
using xtrain::testing::expect_result;
using xtrain::testing::run_with_grads;

struct Grid {
  int64_t gh, gw;
  bool cls;
  std::string name() const { return std::to_string(gh) + "x" + std::to_string(gw) + (cls ? "+cls" : ""); }
  int64_t tokens() const { return gh * gw + (cls ? 1 : 0); }
};

// The reference in float64 with dropout applied as the fused kernel applies it: dropout_hash.h over
// (query's position in the strip order, key row in the kernel's layout: tokens, then levels 1..).
at::Tensor reference_with_dropout(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::vector<int64_t>& windows, const Grid& g, double p, uint64_t seed) {
  if (p == 0) return ms_attention_2d_reference(q, k, v, windows, g.gh, g.gw, g.cls);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), d = q.size(3), c0 = g.cls ? 1 : 0;
  const int64_t blocks = total_blocks_2d(g.gh, g.gw), K = blocks + c0;
  const auto order = strip_order_2d(g.gh, g.gw, g.cls, kStripWidth2d);
  std::vector<int64_t> position(order.size()), key_row(static_cast<size_t>(K));
  for (size_t i = 0; i < order.size(); ++i) position[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  for (int64_t j = 0; j < blocks; ++j) key_row[static_cast<size_t>(j)] = c0 + j;  // reference: levels, then class
  if (g.cls) key_row[static_cast<size_t>(blocks)] = 0;
  const auto factors = attention::dropout_factors(B, NH, T, K, p, seed, q)
                           .index_select(2, at::tensor(position, at::kLong))
                           .index_select(3, at::tensor(key_row, at::kLong));
  auto kp = pool_levels_2d_reference(k.narrow(2, c0, T - c0), g.gh, g.gw);
  auto vp = pool_levels_2d_reference(v.narrow(2, c0, T - c0), g.gh, g.gw);
  if (g.cls) {
    kp = at::cat({kp, k.narrow(2, 0, 1)}, 2);
    vp = at::cat({vp, v.narrow(2, 0, 1)}, 2);
  }
  std::vector<at::Tensor> masks;
  for (int64_t h = 0; h < NH; ++h) masks.push_back(visibility_mask_2d(g.gh, g.gw, window_of_head(h, NH, windows), g.cls));
  const auto hidden = at::stack(masks).logical_not();  // [NH, T, K]
  const auto scores = at::matmul(q, kp.transpose(-2, -1)) / std::sqrt(double(d)) + key_log_sizes_2d(g.gh, g.gw, g.cls, q);
  const auto w = at::softmax(scores.masked_fill(hidden, -INFINITY), -1) * factors;
  return at::matmul(w, vp);
}

AttentionResult reference_f64(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                              const std::vector<int64_t>& windows, const Grid& g, double p = 0, uint64_t seed = 0) {
  return run_with_grads(
      [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return reference_with_dropout(a, b, c, windows, g, p, seed);
      },
      q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), dout.to(at::kDouble));
}

AttentionResult fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                      const std::vector<int64_t>& windows, const Grid& g, double p = 0, uint64_t seed = 0) {
  return run_with_grads(
      [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return ms_attention_2d_cpu(a, b, c, windows, g.gh, g.gw, g.cls, p, seed);
      },
      q, k, v, dout);
}

AttentionResult as_double(const AttentionResult& r) {
  return {r.out.to(at::kDouble), r.dq.to(at::kDouble), r.dk.to(at::kDouble), r.dv.to(at::kDouble)};
}

// Random [B, NH, T, HS] q, k, v, dout of `dtype`, compared in float64 against the reference.
void check_against_reference(const Grid& g, const std::vector<int64_t>& windows, int64_t NH, int64_t HS,
                             at::ScalarType dtype, double rel, double p = 0, uint64_t seed = 0, int64_t B = 2) {
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  auto make = [&] { return at::randn({B, NH, g.tokens(), HS}, opts).to(dtype); };
  const auto q = make(), k = make(), v = make(), dout = make();
  std::string what = g.name() + " windows=[";
  for (size_t i = 0; i < windows.size(); ++i) what += (i ? "," : "") + std::to_string(windows[i]);
  what += "] NH=" + std::to_string(NH) + " " + std::string(c10::toString(dtype)) + " p=" + std::to_string(p);
  const auto got = fused(q, k, v, dout, windows, g, p, seed);
  EXPECT_EQ(got.out.scalar_type(), dtype);
  EXPECT_EQ(got.dk.scalar_type(), dtype);
  expect_result(as_double(got), reference_f64(q, k, v, dout, windows, g, p, seed), rel, what);
}

TEST(Ms2dFusedCpu, Float64MatchesPyTorchFixture) {
  const auto cases = xtrain::testing::load_ms_fixture_cases("ms_attention_2d.pt");
  ASSERT_EQ(cases.size(), 8u);
  for (const auto& c : cases) {  // meta: [cls, B, NH, gh, gw, HS, windows...]
    const auto got = run_with_grads(
        [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return ms_attention_2d_cpu(q, k, v, c.meta_from(6), c.meta_at(3), c.meta_at(4), c.meta_at(0) != 0);
        },
        c.q, c.k, c.v, c.dout);
    expect_result(got, c.expected, 1e-11, c.name + " fused");  // float64, online softmax
  }
}

// Square, non-square, non-power-of-two, a single row and column; windows 1, 2, 3 and mixed lists
// over uneven head splits (3 heads over 2 windows, 4 over 3).
TEST(Ms2dFusedCpu, Float64MatchesReferenceOnManyGrids) {
  torch::manual_seed(11);
  const std::vector<std::pair<int64_t, std::vector<int64_t>>> heads = {{1, {1}}, {2, {2}}, {3, {3, 2}}, {4, {2, 5, 8}}};
  for (const Grid& g : std::vector<Grid>{{1, 1, true}, {1, 7, false}, {6, 1, true}, {3, 4, false}, {5, 5, true},
                                         {6, 10, false}, {13, 9, true}, {16, 16, false}, {9, 17, true}}) {
    for (const auto& [NH, windows] : heads) check_against_reference(g, windows, NH, 8, at::kDouble, 1e-11);
  }
}

TEST(Ms2dFusedCpu, Float32MatchesReference) {
  torch::manual_seed(12);
  // fp32 accumulation over a few hundred keys: a few 1e-6 relative.
  check_against_reference({28, 28, true}, {2, 4}, 4, 16, at::kFloat, 1e-5);
  check_against_reference({14, 9, false}, {1, 3}, 2, 20, at::kFloat, 1e-5);  // HS not a multiple of the vector
}

TEST(Ms2dFusedCpu, BFloat16WithinOnePercent) {
  torch::manual_seed(13);
  // The inputs are the same bf16 values; the error is the bf16 rounding of outputs and dout: ~4e-3.
  check_against_reference({14, 14, true}, {2, 4}, 4, 32, at::kBFloat16, 1e-2);
}

TEST(Ms2dFusedCpu, StridedInputs) {
  torch::manual_seed(14);
  const Grid g{7, 6, true};
  // q, k, v as views of one [B, T, 3, NH, HS] tensor, as an attention layer passes them.
  const auto qkv = at::randn({2, g.tokens(), 3, 4, 8}).permute({2, 0, 3, 1, 4});
  const auto dout = at::randn({2, 4, g.tokens(), 8});
  const auto q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
  expect_result(as_double(fused(q, k, v, dout, {2, 4}, g)), reference_f64(q, k, v, dout, {2, 4}, g), 1e-5, "strided");
}

TEST(Ms2dFusedCpu, EveryIsaMatchesReference) {
  torch::manual_seed(15);
  const Grid g{11, 12, true};
  const auto q = at::randn({1, 2, g.tokens(), 32}), k = at::randn({1, 2, g.tokens(), 32});
  const auto v = at::randn({1, 2, g.tokens(), 32}), dout = at::randn({1, 2, g.tokens(), 32});
  const auto expected = reference_f64(q, k, v, dout, {2, 4}, g);
  using attention::cpu::Isa;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (static_cast<int>(isa) > static_cast<int>(attention::cpu::best_isa())) continue;
    const Isa before = attention::cpu::force_isa(isa);
    expect_result(as_double(fused(q, k, v, dout, {2, 4}, g)), expected, 1e-5, attention::cpu::isa_name(isa));
    attention::cpu::force_isa(before);
  }
}

// Two threads and one or two heads: the backward splits each head's queries into chunks with
// private dK/dV rows (per level and the class key), then reduces them. With dropout.
TEST(Ms2dFusedCpu, MultiThreadedChunksAndDropoutMatchReference) {
  torch::manual_seed(16);
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  check_against_reference({15, 13, true}, {3}, 1, 8, at::kFloat, 1e-5, 0.2, 77, 1);
  check_against_reference({12, 12, false}, {2, 4}, 2, 8, at::kFloat, 1e-5, 0.3, 5, 1);
  at::set_num_threads(before);
  check_against_reference({9, 10, true}, {2, 4}, 2, 8, at::kDouble, 1e-11, 0.25, 1234);
}

TEST(Ms2dFusedCpu, GradcheckFloat64) {
  torch::manual_seed(17);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  for (const Grid& g : std::vector<Grid>{{1, 1, true}, {2, 3, false}, {3, 3, true}, {4, 5, false}}) {
    const auto q = at::randn({1, 2, g.tokens(), 3}, opts), k = at::randn({1, 2, g.tokens(), 3}, opts);
    const auto v = at::randn({1, 2, g.tokens(), 3}, opts);
    xtrain::testing::gradcheck(
        [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
          return ms_attention_2d_cpu(a, b, c, {1, 2}, g.gh, g.gw, g.cls);
        },
        q, k, v, g.name());
  }
}

TEST(Ms2dFusedCpu, RegistryRoutesGridCalls) {
  using namespace attention;
  AttentionCall c;
  c.B = 2;
  c.NH = 4;
  c.T = 197;
  c.HS = 16;
  c.causal = false;
  c.windows = {2, 4};
  c.grid_h = c.grid_w = 14;
  c.cls_token = true;
  EXPECT_EQ(select_attention_kernel("auto", c), "ms2d_fused_cpu");
  EXPECT_THROW(select_attention_kernel("ms_fused_cpu", c), UsageError);   // the 1-D kernel refuses a grid
  EXPECT_THROW(select_attention_kernel("ms_reference", c), UsageError);
  EXPECT_EQ(select_attention_kernel("ms2d_reference", c), "ms2d_reference");
  c.windows.clear();
  EXPECT_EQ(select_attention_kernel("auto", c), "dense_flash_cpu");  // dense: the grid changes nothing
  c.windows = {2, 4};
  c.T = 196;  // one token short of 14x14 + class
  try {
    select_attention_kernel("auto", c);
    ADD_FAILURE() << "T = 196 accepted for 14x14 plus a class token";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("14x14 plus a class token needs T = 197"), std::string::npos) << e.what();
  }
  torch::manual_seed(18);
  const auto x = at::randn({1, 4, 13, 8});
  const auto via_registry = run_attention_2d(x, x, x, {2, 4}, 3, 4, true, 0.0);
  xtrain::testing::expect_rel(via_registry, ms_attention_2d_reference(x, x, x, {2, 4}, 3, 4, true), 1e-5, "registry");
  const auto dense = run_attention_2d(x, x, x, {}, 3, 4, true, 0.0);
  xtrain::testing::expect_rel(dense, dense_attention_composite(x, x, x, false, 0.0, false), 1e-5, "dense 2-D");
  EXPECT_THROW(run_attention_2d(x, x, x, {2, 4}, 3, 4, false, 0.0), UsageError);  // 13 tokens, 3x4 grid
}

}  // namespace
}  // namespace xtrain::kernels::ms_attention::ms_attention_2d_cpu_test
