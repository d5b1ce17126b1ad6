// FLOPs: the profiler's op-by-op count of a GPT's forward pass, times 3, equals the closed form
// 6·N·tokens + 12·L·T·C·tokens exactly (integers in doubles), for a small shape and for the
// default GPT's shape. The GPT here is built in the test from LibTorch modules with the same
// layout and ops as models/gpt.h (monitor may not include models/); every per-module count is
// checked against 2·in·out per token, and a convolution against its own closed form.
#include <gtest/gtest.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>

#include <torch/utils.h>

#include <cmath>

#include "xtrain/monitor/flops.h"
#include "xtrain/monitor/flops_profiler.h"

namespace xtrain::monitor::flops_test {
namespace {

struct Sizes {
  int64_t L, C, NH, T, V;
};

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(int64_t C, int64_t NH) : NH(NH) {
    qkv = register_module("qkv", torch::nn::Linear(C, 3 * C));
    proj = register_module("proj", torch::nn::Linear(C, C));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), HS = C / NH;
    const auto h = qkv->forward(x).view({B, T, 3, NH, HS}).permute({2, 0, 3, 1, 4}).contiguous();
    const auto q = h.select(0, 0).view({B * NH, T, HS}), k = h.select(0, 1).view({B * NH, T, HS});
    const auto v = h.select(0, 2).view({B * NH, T, HS});
    const auto mask = at::zeros({T, T}, x.options());
    auto att = at::softmax(at::baddbmm(mask, q, k.transpose(1, 2), 1.0, 1.0 / std::sqrt(double(HS))), -1);
    return proj->forward(at::bmm(att, v).view({B, NH, T, HS}).transpose(1, 2).reshape({B, T, C}));
  }
  int64_t NH;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(Attention);

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t C, int64_t NH) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    attn = register_module("attn", Attention(C, NH));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    fc = register_module("fc", torch::nn::Linear(C, 4 * C));
    out = register_module("out", torch::nn::Linear(4 * C, C));
  }
  at::Tensor forward(at::Tensor x) {
    x = x + attn->forward(ln1->forward(x));
    return x + out->forward(at::gelu(fc->forward(ln2->forward(x))));
  }
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  Attention attn{nullptr};
  torch::nn::Linear fc{nullptr}, out{nullptr};
};
TORCH_MODULE(Block);

struct TinyGptImpl : torch::nn::Module {
  explicit TinyGptImpl(const Sizes& s) {
    wte = register_module("wte", torch::nn::Embedding(s.V, s.C));
    wpe = register_module("wpe", torch::nn::Embedding(s.T, s.C));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < s.L; ++i) blocks->push_back(Block(s.C, s.NH));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.C})));
  }
  at::Tensor forward(const at::Tensor& idx) {
    auto x = wte->forward(idx) + wpe->weight.narrow(0, 0, idx.size(1));
    for (const auto& b : *blocks) x = b->as<BlockImpl>()->forward(x);
    return at::linear(ln_f->forward(x), wte->weight);  // LM head tied to wte
  }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(TinyGpt);

const ModuleProfile& find(const std::vector<ModuleProfile>& all, const std::string& name) {
  for (const auto& m : all) {
    if (m.name == name) return m;
  }
  throw std::runtime_error("no module " + name);
}

void check_gpt(const Sizes& s, int64_t B) {
  TinyGpt gpt(s);
  const auto idx = at::randint(s.V, {B, s.T}, at::kLong);
  FlopsProfiler profiler(*gpt);
  profiler.start();
  const auto logits = gpt->forward(idx);
  profiler.stop();
  ASSERT_EQ(logits.size(2), s.V);
  const double tokens = double(B) * s.T;
  // The closed form, written out here rather than taken from the code under test.
  const double N = 12.0 * s.L * s.C * s.C + double(s.V) * s.C;
  EXPECT_DOUBLE_EQ(3.0 * profiler.forward_flops(), (6.0 * N + 12.0 * s.L * s.T * s.C) * tokens);
  EXPECT_DOUBLE_EQ(gpt_training_flops_per_token(s.L, s.C, s.T, s.V), 6.0 * N + 12.0 * s.L * s.T * s.C);

  const auto all = profiler.modules();
  const auto& qkv = find(all, "blocks.0.attn.qkv");
  EXPECT_EQ(qkv.type, "Linear");
  EXPECT_EQ(qkv.depth, 4);
  EXPECT_EQ(qkv.params, 3 * s.C * s.C + 3 * s.C);
  EXPECT_DOUBLE_EQ(qkv.flops, 2.0 * tokens * s.C * 3 * s.C);
  // The attention scores and ·v (no parameter inputs) go to attn, the module around qkv: the
  // attn subtree holds qkv, proj and both T×T products.
  EXPECT_DOUBLE_EQ(find(all, "blocks.0.attn").flops,
                   2.0 * tokens * (3 * s.C * s.C + s.C * s.C) + 4.0 * tokens * s.T * s.C);
  EXPECT_DOUBLE_EQ(find(all, "blocks.1.fc").flops, 2.0 * tokens * s.C * 4 * s.C);
  EXPECT_DOUBLE_EQ(find(all, "wte").flops, 2.0 * tokens * s.C * s.V);  // the tied head
  EXPECT_DOUBLE_EQ(find(all, "blocks.0").flops, 2.0 * tokens * 12 * s.C * s.C + 4.0 * tokens * s.T * s.C);
  EXPECT_EQ(find(all, "ln_f").flops, 0.0);
  EXPECT_EQ(find(all, "ln_f").type, "LayerNorm");
  EXPECT_EQ(find(all, "blocks").type, "ModuleList");
  int64_t distinct = 0;
  for (const auto& p : gpt->parameters()) distinct += p.numel();
  EXPECT_EQ(all.front().params, distinct);
  EXPECT_GT(all.front().seconds, 0.0);
  double children = 0;
  for (const auto& m : all) {
    if (m.depth == 1) children += m.seconds;
  }
  EXPECT_LE(children, all.front().seconds * (1 + 1e-9));
}

TEST(Flops, SmallGptMatchesClosedForm) { check_gpt({2, 32, 4, 16, 64}, 2); }

TEST(Flops, DefaultGptShapeMatchesClosedForm) { check_gpt({4, 256, 4, 256, 256}, 1); }  // configs/default.json

TEST(Flops, ConvolutionAndBroadcastMatmul) {
  struct NetImpl : torch::nn::Module {
    NetImpl() {
      conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
      w = register_parameter("w", at::randn({8 * 16 * 16, 10}));
    }
    torch::nn::Conv2d conv{nullptr};
    at::Tensor w;
  };
  auto net = std::make_shared<NetImpl>();
  FlopsProfiler profiler(*net);
  profiler.start();
  const auto y = net->conv->forward(at::randn({2, 3, 16, 16}));
  const auto z = at::matmul(y.reshape({2, 1, -1}), net->w);  // [2,1,2048] x [2048,10]
  profiler.stop();
  EXPECT_EQ(z.size(2), 10);
  const auto all = profiler.modules();
  EXPECT_DOUBLE_EQ(find(all, "conv").flops, 2.0 * (2 * 8 * 16 * 16) * (3 * 3 * 3));
  EXPECT_DOUBLE_EQ(all.front().flops, 2.0 * (2 * 8 * 16 * 16) * (3 * 3 * 3) + 2.0 * 2 * 2048 * 10);
  EXPECT_EQ(find(all, "conv").type, "Conv2d");
  FlopsProfilerOptions o;
  o.module_depth = -1;
  const std::string table = profiler.table(o, 3);
  for (const char* word : {"step 3", "(model)", "conv", "Conv2d", "top modules"}) {
    EXPECT_NE(table.find(word), std::string::npos) << word << " in\n" << table;
  }
}

TEST(Flops, PeakAndMfu) {
  torch::manual_seed(7);
  const at::Tensor before = at::randn({4});
  torch::manual_seed(7);
  const PeakFlops p = measure_peak_flops(c10::Device(c10::kCPU), 128);
  EXPECT_TRUE(at::randn({4}).equal(before)) << "the measurement must not draw from the global generator";
  EXPECT_GT(p.fp32, 0.0);
  EXPECT_NE(p.describe().find("FLOP/s"), std::string::npos);
  EXPECT_DOUBLE_EQ(mfu(50e9, 0.5, 200e9), 0.5);
  EXPECT_EQ(mfu(1, 1, 0), 0.0);
  EXPECT_EQ(si(3.29e6), "3.29M");
  EXPECT_EQ(si(512), "512");
}

}  // namespace
}  // namespace xtrain::monitor::flops_test
