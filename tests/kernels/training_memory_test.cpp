// The GPT hot path end to end on a tiny GPT built from nn/ blocks: the attention core (routed
// GEMMs on strided views, fp32 scores) against float64 at:: ops in fp32 and bf16; training results
// bit-identical with and without the memory pool; and steady-state training (persistent gradients,
// in-place update, as the engine does) taking no new memory from the OS after the first steps.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/base/memory_pool.h"
#include "xtrain/kernels/linear.h"
#include "xtrain/nn/block.h"
#include "xtrain/nn/embedding.h"
#include "xtrain/nn/layer_norm.h"

namespace xtrain::kernels::training_memory_test {
namespace {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;

// Causal attention in float64 from the module's own parameters (nanoGPT's math, no fused ops).
at::Tensor attention_reference(nn::CausalSelfAttentionImpl& attn, const at::Tensor& x, int64_t NH) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), HS = C / NH;
  auto d = [](const at::Tensor& t) { return t.to(at::kDouble); };
  const auto qkv = at::linear(x, d(attn.qkv->weight), d(attn.qkv->bias));
  auto head = [&](int64_t i) { return qkv.narrow(2, i * C, C).view({B, T, NH, HS}).transpose(1, 2); };
  auto att = at::matmul(head(0), head(1).transpose(2, 3)) / std::sqrt(static_cast<double>(HS));
  att = att.masked_fill(at::ones({T, T}, at::kBool).triu(1), -INFINITY).softmax(-1);
  const auto y = at::matmul(att, head(2)).transpose(1, 2).reshape({B, T, C});
  return at::linear(y, d(attn.proj->weight), d(attn.proj->bias));
}

TEST(AttentionCore, ForwardAndInputGradientMatchFloat64InFp32AndBf16) {
  torch::manual_seed(0);
  const int64_t B = 2, T = 10, C = 32, NH = 4;
  nn::CausalSelfAttention attn(C, NH, 16, 0.0);
  const auto x0 = at::randn({B, T, C});
  const auto g = at::randn({B, T, C});
  auto xr = x0.to(at::kDouble).requires_grad_();
  const auto yr = attention_reference(*attn, xr, NH);
  (yr * g.to(at::kDouble)).sum().backward();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    attn->to(dtype);
    auto x = x0.to(dtype).detach().requires_grad_();
    const auto y = attn->forward(x);
    (y * g.to(dtype)).sum().backward();
    // fp32: sums of <= 3C terms, rounded once per op. bf16: inputs and weights rounded to 8 bits
    // (relative 2^-9 each) through four GEMMs; scores and softmax stay fp32.
    const double rtol = dtype == at::kFloat ? 1e-4 : 5e-2, atol = dtype == at::kFloat ? 1e-5 : 3e-2;
    const auto what = std::string(dtype == at::kFloat ? "fp32" : "bf16");
    expect_close(y.to(at::kFloat), yr, rtol, atol, what + " y");
    expect_close(x.grad().to(at::kFloat), xr.grad(), rtol, atol, what + " dx");
    attn->to(at::kFloat);
  }
}

struct TinyGpt {
  nn::Embedding wte{64, 32}, wpe{16, 32};
  torch::nn::ModuleList blocks;
  nn::LayerNorm ln_f{32};
  std::vector<at::Tensor> params;

  TinyGpt() {
    for (int i = 0; i < 2; ++i) blocks->push_back(nn::Block(32, 4, 16, 0.0));
    for (auto* m : std::initializer_list<torch::nn::Module*>{wte.get(), wpe.get(), blocks.get(), ln_f.get()}) {
      for (auto& p : m->parameters()) params.push_back(p);
    }
  }
  at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets) {
    auto x = wte->forward(idx) + wpe->weight.narrow(0, 0, idx.size(1));
    for (const auto& b : *blocks) x = b->as<nn::BlockImpl>()->forward(x);
    const auto logits = linear(ln_f->forward(x), wte->weight, at::Tensor());
    return at::cross_entropy_loss(logits.reshape({-1, 64}), targets.reshape({-1}));
  }
  // One step as the engine does it: gradients live in persistent buffers, zeroed and updated in place.
  void step(const at::Tensor& idx, const at::Tensor& targets) {
    loss(idx, targets).backward();
    at::NoGradGuard no_grad;
    for (auto& p : params) {
      p.sub_(p.grad(), 1e-2);
      p.mutable_grad().zero_();
    }
  }
};

std::vector<at::Tensor> train(bool pool, int steps) {
  base::MemoryPoolOptions o;
  o.enabled = pool;
  memory_pool::install(o);
  torch::manual_seed(7);
  TinyGpt gpt;
  for (auto& p : gpt.params) p.mutable_grad() = at::zeros_like(p);
  const auto data = at::randint(0, 64, {4, 17});
  for (int s = 0; s < steps; ++s) gpt.step(data.narrow(1, 0, 16), data.narrow(1, 1, 16));
  std::vector<at::Tensor> out;
  for (auto& p : gpt.params) out.push_back(p.detach().clone());
  o.enabled = false;
  memory_pool::install(o);
  return out;
}

TEST(TrainingMemory, ResultsAreBitIdenticalWithAndWithoutThePool) {
  const auto with = train(true, 4), without = train(false, 4);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) expect_equal(with[i], without[i], "parameter " + std::to_string(i));
}

TEST(TrainingMemory, SteadyStateStepsTakeNoNewMemoryFromTheOs) {
  memory_pool::install({});
  torch::manual_seed(7);
  TinyGpt gpt;
  int64_t largest = 0;
  for (auto& p : gpt.params) {
    p.mutable_grad() = at::zeros_like(p);
    largest = std::max<int64_t>(largest, p.numel() * p.element_size());
  }
  const auto data = at::randint(0, 64, {4, 17});
  for (int s = 0; s < 2; ++s) gpt.step(data.narrow(1, 0, 16), data.narrow(1, 1, 16));
  const auto warm = memory_pool::stats();
  for (int s = 0; s < 4; ++s) gpt.step(data.narrow(1, 0, 16), data.narrow(1, 1, 16));
  const auto after = memory_pool::stats();
  EXPECT_EQ(after.os_allocations_at_least(largest / 2) - warm.os_allocations_at_least(largest / 2), 0)
      << "parameter-sized blocks newly allocated in steady state";
  EXPECT_EQ(after.os_allocations - warm.os_allocations, 0) << "any block newly allocated in steady state";
  EXPECT_GT(after.cache_hits - warm.cache_hits, 100);  // the step does allocate; the pool serves it
  base::MemoryPoolOptions off;
  off.enabled = false;
  memory_pool::install(off);
}

}  // namespace
}  // namespace xtrain::kernels::training_memory_test
