// The flops profiler on xtrain's own GPT (models/gpt.h): its Linears run kernels::gemm_out (oneDNN
// or ATen), its attention a custom autograd function over the same GEMM, or a registry kernel with
// dropout or multi-scale. The profiler reported 0 FLOPs for every one of these modules (issue 21)
// because none of that is an ATen matmul. Every module's forward FLOPs are checked against closed
// forms written here: 2·m·n·k per matrix product, dense attention 4·B·T²·C (the full T×T, as the
// MFU convention counts it), multi-scale 4·HS per (query, pooled key) with the keys counted from the
// dense reference's visibility mask; the modules' exclusive counts sum to the model's total, and
// 3x the total is the training closed form of flops.h.
#include <gtest/gtest.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/utils.h>

#include <map>

#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/ms_attention/reference.h"
#include "xtrain/kernels/ms_attention/reference_2d.h"
#include "xtrain/models/gpt.h"
#include "xtrain/monitor/flops.h"
#include "xtrain/monitor/flops_profiler.h"
#include "xtrain/precision/policy.h"

namespace xtrain::monitor::flops_profiler_gpt_test {
namespace {

struct Shape {
  int64_t L = 2, C = 32, NH = 4, T = 24, V = 64, B = 2;
};

models::GPT make_gpt(const Shape& s, double dropout = 0.0, std::vector<int64_t> windows = {}) {
  torch::manual_seed(1);
  models::ModelOptions o;
  o.layers = s.L;
  o.d_model = s.C;
  o.heads = s.NH;
  o.seq_len = s.T;
  o.vocab = s.V;
  o.dropout = dropout;
  if (!windows.empty()) {
    o.attention.type = "multiscale";
    o.attention.windows = std::move(windows);
  }
  return models::GPT(o);
}

std::map<std::string, ModuleProfile> profile(models::GPT& gpt, const Shape& s) {
  const auto idx = at::randint(s.V, {s.B, s.T}, at::kLong);
  FlopsProfiler profiler(*gpt);
  profiler.start();
  const auto logits = gpt->forward(idx);
  profiler.stop();
  EXPECT_EQ(logits.size(2), s.V);
  std::map<std::string, ModuleProfile> out;
  for (const auto& m : profiler.modules()) out[m.name] = m;
  EXPECT_EQ(profiler.forward_flops(), out[""].flops);
  return out;
}

// Each module's subtree count against the closed form; `attention` is one block's attention core.
void expect_counts(std::map<std::string, ModuleProfile>& all, const Shape& s, double attention) {
  const double tokens = double(s.B) * s.T, C = double(s.C);
  for (int64_t l = 0; l < s.L; ++l) {
    const std::string b = "blocks." + std::to_string(l);
    EXPECT_DOUBLE_EQ(all[b + ".attn.qkv"].flops, 2 * tokens * C * 3 * C) << b;
    EXPECT_DOUBLE_EQ(all[b + ".attn.proj"].flops, 2 * tokens * C * C) << b;
    EXPECT_DOUBLE_EQ(all[b + ".attn"].flops, 2 * tokens * 4 * C * C + attention) << b;
    EXPECT_DOUBLE_EQ(all[b + ".mlp.fc"].flops, 2 * tokens * C * 4 * C) << b;
    EXPECT_DOUBLE_EQ(all[b + ".mlp.proj"].flops, 2 * tokens * 4 * C * C) << b;
    EXPECT_DOUBLE_EQ(all[b + ".mlp"].flops, 2 * tokens * 8 * C * C) << b;
    EXPECT_DOUBLE_EQ(all[b].flops, 2 * tokens * 12 * C * C + attention) << b;
    EXPECT_EQ(all[b + ".ln1"].flops, 0.0) << b;
  }
  EXPECT_DOUBLE_EQ(all["wte"].flops, 2 * tokens * C * s.V);  // the tied LM head
  EXPECT_EQ(all["wpe"].flops, 0.0);
  EXPECT_EQ(all["ln_f"].flops, 0.0);
  // The total is the sum of its parts: blocks, the head, nothing lost or counted twice.
  double parts = all["wte"].flops + all["wpe"].flops + all["ln_f"].flops;
  for (int64_t l = 0; l < s.L; ++l) parts += all["blocks." + std::to_string(l)].flops;
  EXPECT_DOUBLE_EQ(all[""].flops, parts);
  EXPECT_DOUBLE_EQ(all[""].flops, s.L * (2 * tokens * 12 * C * C + attention) + 2 * tokens * C * s.V);
}

TEST(FlopsProfilerGpt, Fp32MatchesClosedForm) {
  const Shape s;
  auto gpt = make_gpt(s);
  auto all = profile(gpt, s);
  const double tokens = double(s.B) * s.T;
  expect_counts(all, s, 4.0 * tokens * s.T * s.C);
  // 3x forward = the training FLOPs per token of flops.h, times the tokens.
  EXPECT_DOUBLE_EQ(3 * all[""].flops, gpt_training_flops_per_token(s.L, s.C, s.T, s.V) * tokens);
  EXPECT_GT(all["blocks.0.attn"].seconds, 0.0);
}

TEST(FlopsProfilerGpt, Bf16ParametersMatchClosedForm) {
  const Shape s;
  auto gpt = make_gpt(s);
  gpt->to(at::kBFloat16);
  auto all = profile(gpt, s);
  expect_counts(all, s, 4.0 * s.B * s.T * s.T * s.C);
}

TEST(FlopsProfilerGpt, AutocastCopiesBelongToTheirModule) {
  // fp32 parameters, bf16 compute: kernels::linear casts the weight first, so the GEMM sees a copy
  // of it; the copy must still count for the Linear, not for the module around it.
  const Shape s;
  auto gpt = make_gpt(s);
  precision::AutocastGuard bf16(at::kBFloat16, /*cuda=*/false);
  auto all = profile(gpt, s);
  expect_counts(all, s, 4.0 * s.B * s.T * s.T * s.C);
}

TEST(FlopsProfilerGpt, DropoutAttentionKernel) {
  // With dropout in training the registry's fused kernel runs (run_attention): counted the same.
  const Shape s;
  auto gpt = make_gpt(s, 0.1);
  gpt->train();
  auto all = profile(gpt, s);
  expect_counts(all, s, 4.0 * s.B * s.T * s.T * s.C);
}

TEST(FlopsProfilerGpt, MultiscaleCountsPooledKeys) {
  Shape s;
  s.NH = 4;
  s.T = 37;  // not a multiple of any window
  const std::vector<int64_t> windows = {4, 8, 16};  // 4 heads over 3 windows: 2, 1, 1
  auto gpt = make_gpt(s, 0.0, windows);
  gpt->eval();
  auto all = profile(gpt, s);
  const int64_t HS = s.C / s.NH;
  const int64_t heads_per_window[] = {2, 1, 1};  // the design page's split, written out
  double attention = 0;
  for (size_t g = 0; g < windows.size(); ++g) {
    const double keys = kernels::ms_attention::visibility_mask(s.T, windows[g], /*causal=*/true).sum().item<double>();
    attention += double(s.B) * heads_per_window[g] * 4.0 * HS * keys;
  }
  EXPECT_LT(attention, 4.0 * s.B * s.T * s.T * s.C) << "fewer keys than dense attention";
  expect_counts(all, s, attention);
}

TEST(FlopsProfilerGpt, MultiscaleBidirectionalAndDenseKernelCalls) {
  // run_attention outside any model: the ops go to the root module. Bidirectional multi-scale with
  // 3 heads over windows [3, 8] (2 and 1 heads), then dense non-causal (the full T×T either way).
  const int64_t B = 2, NH = 3, T = 29, HS = 8;
  const auto root = std::make_shared<torch::nn::Module>();  // named_modules needs a shared_ptr
  const auto q = at::randn({B, NH, T, HS}), k = at::randn({B, NH, T, HS}), v = at::randn({B, NH, T, HS});
  FlopsProfiler profiler(*root);
  profiler.start();
  kernels::attention::run_attention(q, k, v, /*causal=*/false, {3, 8}, 0.0);
  profiler.stop();
  double expected = 0;
  const int64_t heads_per_window[] = {2, 1};
  const int64_t windows[] = {3, 8};
  for (int g = 0; g < 2; ++g) {
    const double keys = kernels::ms_attention::visibility_mask(T, windows[g], /*causal=*/false).sum().item<double>();
    expected += double(B) * heads_per_window[g] * 4.0 * HS * keys;
  }
  EXPECT_DOUBLE_EQ(profiler.forward_flops(), expected);
  profiler.reset();
  profiler.start();
  kernels::attention::run_attention(q, k, v, /*causal=*/false, {}, 0.0);
  profiler.stop();
  EXPECT_DOUBLE_EQ(profiler.forward_flops(), 4.0 * B * NH * T * T * HS);
}

TEST(FlopsProfilerGpt, GridMultiscaleCountsItsKeys) {
  // run_attention_2d on a 3x5 grid with a class token: 3 heads over windows [1, 2] (2 and 1 heads)
  // counts 4·HS per (query, key) of the 2-D reference's mask; windows covering the grid, and dense,
  // count the full T×T.
  const int64_t B = 2, NH = 3, gh = 3, gw = 5, T = gh * gw + 1, HS = 8;
  const auto root = std::make_shared<torch::nn::Module>();
  const auto q = at::randn({B, NH, T, HS}), k = at::randn({B, NH, T, HS}), v = at::randn({B, NH, T, HS});
  FlopsProfiler profiler(*root);
  auto flops = [&](const std::vector<int64_t>& windows) {
    profiler.reset();
    profiler.start();
    kernels::attention::run_attention_2d(q, k, v, windows, gh, gw, /*cls_token=*/true, 0.0);
    profiler.stop();
    return profiler.forward_flops();
  };
  const double keys_1 = kernels::ms_attention::visibility_mask_2d(gh, gw, 1, true).sum().item<double>();
  const double keys_2 = kernels::ms_attention::visibility_mask_2d(gh, gw, 2, true).sum().item<double>();
  EXPECT_LT(keys_1, double(T) * T);
  EXPECT_DOUBLE_EQ(flops({1, 2}), double(B) * 4.0 * HS * (2 * keys_1 + keys_2));
  EXPECT_DOUBLE_EQ(flops({10, 12}), 4.0 * B * NH * T * T * HS);
  EXPECT_DOUBLE_EQ(flops({}), 4.0 * B * NH * T * T * HS);
}

}  // namespace
}  // namespace xtrain::monitor::flops_profiler_gpt_test
