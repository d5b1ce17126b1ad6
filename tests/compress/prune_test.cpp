// Pruning against closed forms and against the unpruned model: the gradual (AGP) schedule equals
// Zhu & Gupta's formula; magnitude masks zero exactly the smallest weights (per layer, and with one
// threshold per global group) and survive optimizer steps; NNI-style config lists resolve as NNI
// does; structured channel pruning physically shrinks the layers and the pruned model computes
// what the original computes with those channels' contributions removed.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/conv.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/graph/trace.h"
#include "xtrain/compress/prune/channel_prune.h"
#include "xtrain/compress/prune/magnitude.h"
#include "xtrain/models/factory.h"

namespace xtrain::compress::prune_test {
namespace {

using xtrain::testing::expect_close;

models::Model mlp(std::vector<int64_t> hidden = {32, 24}) {
  models::ModelOptions o;
  o.type = "mlp", o.in_features = 64, o.hidden = std::move(hidden), o.num_classes = 10;
  at::manual_seed(2);
  return models::build_model(o);
}

TEST(Prune, AgpScheduleFollowsTheCubicFormula) {
  // s_t = s_f + (s_i − s_f)(1 − (t − t0)/(t1 − t0))³ with t floored to t0 + k·frequency.
  const double si = 0.1, sf = 0.8;
  const int64_t t0 = 10, t1 = 110, freq = 10;
  auto formula = [&](double t) { return sf + (si - sf) * std::pow(1.0 - (t - t0) / double(t1 - t0), 3); };
  EXPECT_DOUBLE_EQ(agp_sparsity(0, si, sf, t0, t1, freq), si);
  EXPECT_DOUBLE_EQ(agp_sparsity(10, si, sf, t0, t1, freq), si);
  EXPECT_DOUBLE_EQ(agp_sparsity(35, si, sf, t0, t1, freq), formula(30));  // floored to 30
  EXPECT_DOUBLE_EQ(agp_sparsity(60, si, sf, t0, t1, freq), formula(60));
  EXPECT_NEAR(agp_sparsity(60, si, sf, t0, t1, freq), 0.8 - 0.7 * 0.125, 1e-15);  // half way: (1/2)³
  EXPECT_DOUBLE_EQ(agp_sparsity(109, si, sf, t0, t1, freq), formula(100));
  EXPECT_DOUBLE_EQ(agp_sparsity(110, si, sf, t0, t1, freq), sf);
  EXPECT_DOUBLE_EQ(agp_sparsity(1000, si, sf, t0, t1, freq), sf);
  for (int64_t t = t0; t < t1; ++t) {  // monotone non-decreasing
    EXPECT_LE(agp_sparsity(t, si, sf, t0, t1, freq), agp_sparsity(t + 1, si, sf, t0, t1, freq));
  }
  EXPECT_THROW(agp_sparsity(5, si, sf, 10, 10, freq), UsageError);
}

// Largest pruned magnitude <= smallest kept magnitude, over the given weights together.
void expect_smallest_pruned(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& originals,
                            const std::string& what) {
  std::vector<at::Tensor> pruned, kept;
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto zero = weights[i].eq(0).reshape({-1});
    const auto mag = originals[i].abs().reshape({-1});
    pruned.push_back(mag.masked_select(zero));
    kept.push_back(mag.masked_select(zero.logical_not()));
    // Kept weights are untouched.
    EXPECT_TRUE(at::equal(weights[i].reshape({-1}).masked_select(zero.logical_not()),
                          originals[i].reshape({-1}).masked_select(zero.logical_not())))
        << what;
  }
  EXPECT_LE(at::cat(pruned).max().item<float>(), at::cat(kept).min().item<float>()) << what;
}

TEST(Prune, MagnitudeMasksPerLayerAndGlobal) {
  at::NoGradGuard no_grad;
  {
    auto m = mlp();
    const auto g = trace(*m.module);
    PruneRule r;
    r.sparsity = 0.7, r.op_types = {"Linear"};
    auto targets = resolve_targets(g, {r});
    ASSERT_EQ(targets.size(), 3u);
    std::vector<at::Tensor> before;
    for (const auto& t : targets) before.push_back(t.weight.clone());
    MaskSet masks(targets);
    masks.update();
    for (size_t i = 0; i < targets.size(); ++i) {
      const int64_t n = targets[i].weight.numel();
      EXPECT_EQ(n - targets[i].weight.count_nonzero().item<int64_t>(), std::llround(0.7 * n)) << targets[i].name;
      expect_smallest_pruned({targets[i].weight}, {before[i]}, targets[i].name);
    }
    EXPECT_NEAR(weight_sparsity(g), 0.7, 1e-3);
  }
  {
    auto m = mlp();
    const auto g = trace(*m.module);
    PruneRule r;
    r.total_sparsity = 0.5, r.op_types = {"Linear"};
    auto targets = resolve_targets(g, {r});
    std::vector<at::Tensor> weights, before;
    int64_t total = 0;
    for (const auto& t : targets) weights.push_back(t.weight), before.push_back(t.weight.clone()), total += t.weight.numel();
    MaskSet masks(targets);
    masks.update();
    EXPECT_NEAR(masks.sparsity(), static_cast<double>(std::llround(0.5 * total)) / total, 1e-12);
    expect_smallest_pruned(weights, before, "global threshold");
  }
}

TEST(Prune, MaskSurvivesTrainingSteps) {
  auto m = mlp();
  const auto g = trace(*m.module);
  PruneRule r;
  r.sparsity = 0.8, r.op_types = {"Linear"};
  MaskSet masks(resolve_targets(g, {r}));
  masks.update();
  std::vector<at::Tensor> zero_before;
  for (const auto& t : masks.targets()) zero_before.push_back(t.weight.eq(0));
  const auto w0 = masks.targets()[0].weight.clone();
  torch::optim::SGD opt(m.module->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  at::manual_seed(3);
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    const auto x = at::randn({16, 1, 8, 8});
    const auto y = at::randint(0, 10, {16}, at::kLong);
    at::cross_entropy_loss(m.forward(x), y).backward();
    opt.step();
    masks.apply();  // what the compress fine-tuning loop does after every optimizer step
  }
  for (size_t i = 0; i < masks.targets().size(); ++i) {
    const auto& w = masks.targets()[i].weight;
    EXPECT_TRUE(at::equal(w.eq(0), zero_before[i])) << masks.targets()[i].name << ": mask changed";
  }
  EXPECT_FALSE(at::equal(masks.targets()[0].weight, w0)) << "the kept weights did train";
  EXPECT_NEAR(masks.sparsity(), 0.8, 1e-3);
}

TEST(Prune, ConfigListResolvesAsNni) {
  models::ModelOptions o;
  o.layers = 2, o.d_model = 32, o.heads = 4, o.seq_len = 16, o.vocab = 64;
  auto gpt = models::build_model(o);
  const auto g = trace(*gpt.module);
  PruneRule all, one, skip;
  all.sparsity = 0.5, all.op_types = {"Linear"};
  one.sparsity = 0.9, one.op_names = {"blocks.0.mlp.fc"};  // a later entry overrides
  skip.exclude = true, skip.op_names = {"blocks.1.attn.qkv"};
  const auto t = resolve_targets(g, {all, one, skip});
  std::map<std::string, double> got;
  for (const auto& x : t) got[x.name] = x.sparsity;
  EXPECT_EQ(got.size(), 7u);  // 8 block Linears − 1 excluded; the tied lm_head (the embedding) is left
  EXPECT_EQ(got.count("lm_head"), 0u);
  EXPECT_EQ(got.count("blocks.1.attn.qkv"), 0u);
  EXPECT_DOUBLE_EQ(got["blocks.0.mlp.fc"], 0.9);
  EXPECT_DOUBLE_EQ(got["blocks.1.mlp.proj"], 0.5);
  PruneRule typo;
  typo.sparsity = 0.5, typo.op_names = {"blocks.0.mlp.fx"};
  try {
    resolve_targets(g, {typo});
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.mlp.fc"), std::string::npos) << e.what();  // did you mean
  }
}

TEST(Prune, ChannelsToKeepAreTheLargestNorms) {
  const auto w = at::tensor({1.0f, -1.0f, 0.1f, 0.1f, 3.0f, 0.0f, -0.5f, -0.6f}).view({4, 2});
  // L1 norms 2, 0.2, 3, 1.1; L2 norms 1.41, 0.14, 3, 0.78.
  EXPECT_EQ(channels_to_keep(w, 0.5, 1), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(channels_to_keep(w, 0.25, 2), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(channels_to_keep(w, 0.99, 1), (std::vector<int64_t>{2}));  // at least one channel stays
}

TEST(Prune, StructuredMlpKeepsOutputsOfKeptChannels) {
  at::NoGradGuard no_grad;
  auto m = mlp();
  m.module->eval();
  const auto g = trace(*m.module);
  const auto x = at::randn({6, 1, 8, 8});
  const auto& fc0 = g.nodes[1];  // hidden.0 (after flatten)
  ASSERT_EQ(fc0.name, "hidden.0");
  const auto keep = channels_to_keep(fc0.weight, 0.5, 1);
  // Reference: the original model with hidden.1's input columns of the dropped channels zeroed.
  auto ref_model = mlp();
  ref_model.module->eval();
  const auto rg = trace(*ref_model.module);
  auto drop = at::ones({fc0.weight.size(0)}, at::kBool);
  drop.index_fill_(0, at::tensor(keep, at::kLong), false);
  rg.nodes[2].weight.index_fill_(1, drop.nonzero().squeeze(1), 0.0);
  const auto expected = ref_model.forward(x);

  PruneRule r;
  r.sparsity = 0.5, r.op_names = {"hidden.0", "head"};
  const auto report = prune_channels(*m.module, g, resolve_targets(g, {r}), 1);
  ASSERT_EQ(report.pruned.size(), 1u);
  EXPECT_EQ(report.pruned[0].before, 32);
  EXPECT_EQ(report.pruned[0].after, 16);
  ASSERT_EQ(report.skipped.size(), 1u);  // head: its output is the model's
  EXPECT_EQ(g.nodes[1].weight.sizes(), (at::IntArrayRef{16, 64}));
  EXPECT_EQ(g.nodes[2].weight.sizes(), (at::IntArrayRef{24, 16}));
  // Same sums over the kept channels, in a different order of fewer terms: float rounding only.
  expect_close(m.forward(x), expected, 1e-5, 1e-6, "pruned mlp");
  expect_close(run_graph(g, x), expected, 1e-5, 1e-6, "pruned graph");
}

TEST(Prune, StructuredResNetShrinksConvBatchNormAndConsumer) {
  at::NoGradGuard no_grad;
  models::ModelOptions o;
  o.type = "resnet18", o.num_classes = 10;
  at::manual_seed(3);
  auto m = models::build_model(o);
  at::manual_seed(3);
  auto ref = models::build_model(o);
  for (auto* model : {&m, &ref}) {  // identical non-trivial BatchNorm statistics in both
    at::manual_seed(4);
    for (auto& b : model->module->named_buffers()) {
      if (b.key().find("running_mean") != std::string::npos) b.value().copy_(at::randn(b.value().sizes()) * 0.1);
      if (b.key().find("running_var") != std::string::npos) b.value().copy_(at::rand(b.value().sizes()) + 0.5);
    }
    model->module->eval();
  }
  const auto g = trace(*m.module, {{1, 28, 28}});
  PruneRule r;
  r.sparsity = 0.5, r.op_types = {"Conv2d"};
  const auto targets = resolve_targets(g, {r});
  // Reference first (the original weights decide the kept channels): zero the consumer's inputs.
  const auto rg = trace(*ref.module, {{1, 28, 28}});
  for (const auto& t : targets) {
    std::string why;
    const int c = channel_consumer(g, t.node, &why);
    if (c < 0) continue;
    const auto keep = channels_to_keep(g.nodes[t.node].weight, 0.5, 1);
    auto drop = at::ones({g.nodes[t.node].weight.size(0)}, at::kBool);
    drop.index_fill_(0, at::tensor(keep, at::kLong), false);
    rg.nodes[c].weight.index_fill_(1, drop.nonzero().squeeze(1), 0.0);
  }
  const auto x = at::randn({2, 1, 28, 28});
  const auto expected = ref.forward(x);
  const auto report = prune_channels(*m.module, g, targets, 1);
  EXPECT_EQ(report.pruned.size(), 8u);  // conv1 of each basic block; the rest feed residual adds
  auto conv = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(find_module(*m.module, "layer2.0.conv1"));
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->weight.size(0), 64);
  EXPECT_EQ(conv->options.out_channels(), 64);
  EXPECT_EQ(find_module(*m.module, "layer2.0.bn1")->named_buffers()["running_mean"].size(0), 64);
  EXPECT_EQ(find_module(*m.module, "layer2.0.conv2")->named_parameters()["weight"].size(1), 64);
  expect_close(m.forward(x), expected, 1e-4, 1e-5, "pruned resnet18 (module forward)");
}

}  // namespace
}  // namespace xtrain::compress::prune_test
