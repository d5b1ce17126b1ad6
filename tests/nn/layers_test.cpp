// Layer properties that need no fixture (the numbers are checked end to end by
// tests/models/gpt_test.cpp against PyTorch): attention is causal and has no per-call state,
// Linear's default init and GEMM equal torch.nn.Linear's closed forms, head-count errors.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/nn/block.h"
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/linear.h"

namespace xtrain::nn::layers_test {
namespace {

using xtrain::testing::expect_close;

TEST(Attention, OutputAtTDependsOnlyOnPositionsUpToT) {
  torch::manual_seed(0);
  CausalSelfAttention attn(16, 4, 8, 0.0);
  const auto x = at::randn({2, 8, 16});
  auto changed = x.clone();
  changed.select(1, 5).normal_();  // position 5 only
  const auto a = attn->forward(x), b = attn->forward(changed);
  // Positions 0..4 use the same inputs and the same ops: bit-identical.
  EXPECT_TRUE(at::equal(a.narrow(1, 0, 5), b.narrow(1, 0, 5)));
  EXPECT_FALSE(at::allclose(a.narrow(1, 5, 3), b.narrow(1, 5, 3)));
  // A shorter sequence reuses the cached mask: its output is the prefix of the long one.
  expect_close(attn->forward(x.narrow(1, 0, 3)), a.narrow(1, 0, 3), 1e-6, 1e-7, "T=3 prefix");
}

TEST(Attention, HeadsMustDivideWidth) {
  try {
    CausalSelfAttention attn(10, 4, 8, 0.0);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.model.heads"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("d_model"), std::string::npos) << e.what();
  }
}

TEST(Linear, DefaultInitAndForwardAreTorchNnLinears) {
  torch::manual_seed(0);
  Linear linear(50, 20);
  const double bound = 1 / std::sqrt(50.0);  // kaiming_uniform(a=√5) on fan_in 50 = U(±1/√50)
  EXPECT_LE(linear->weight.abs().max().item<double>(), bound);
  EXPECT_LE(linear->bias.abs().max().item<double>(), bound);
  EXPECT_GT(linear->weight.abs().max().item<double>(), 0.9 * bound);
  const auto x = at::randn({3, 7, 50}, at::kDouble);
  Linear no_bias(50, 20, false);
  EXPECT_FALSE(no_bias->bias.defined());
  EXPECT_EQ(no_bias->named_parameters().size(), 1u);
  // Closed form in float64 against float32 results: fp32 rounding of 50-term dot products.
  const auto w = linear->weight.to(at::kDouble), bias = linear->bias.to(at::kDouble);
  expect_close(linear->forward(x.to(at::kFloat)), at::matmul(x, w.t()) + bias, 1e-5, 1e-6, "x·Wᵀ + b");
}

TEST(Block, ParameterNamesAreStable) {
  Block block(8, 2, 4, 0.0);
  std::vector<std::string> names;
  for (const auto& p : block->named_parameters()) names.push_back(p.key());
  const std::vector<std::string> expected = {
      "ln1.weight",     "ln1.bias",      "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
      "ln2.weight",     "ln2.bias",      "mlp.fc.weight",   "mlp.fc.bias",   "mlp.proj.weight",  "mlp.proj.bias"};
  EXPECT_EQ(names, expected);
}

// bf16 on the CPU is normalised in fp32 (nn/layer_norm.cpp): the result is fp32 LayerNorm's, rounded.
TEST(LayerNormBf16, MatchesFp32LayerNormOfTheSameValues) {
  at::manual_seed(3);
  LayerNorm ln(64);
  {
    at::NoGradGuard no_grad;
    ln->weight.copy_(at::randn({64}));
    ln->bias.copy_(at::randn({64}));
  }
  const auto x = (at::randn({8, 64}) * 5 + 2).to(at::kBFloat16);
  const auto ref = ln->forward(x.to(at::kFloat)).detach();
  ln->to(at::kBFloat16);
  auto xb = x.clone().requires_grad_(true);
  const auto y = ln->forward(xb);
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  // The bf16 weights differ from the fp32 ones by one rounding too; outputs are O(3).
  expect_close(y.detach().to(at::kFloat), ref, 2e-2, 2e-2, "bf16 LayerNorm");
  y.sum().backward();
  ASSERT_TRUE(xb.grad().defined());
  EXPECT_EQ(xb.grad().scalar_type(), at::kBFloat16);
  EXPECT_EQ(ln->weight.grad().scalar_type(), at::kBFloat16);
}

}  // namespace
}  // namespace xtrain::nn::layers_test
