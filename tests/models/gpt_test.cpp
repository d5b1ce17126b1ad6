// GPT against tests/reference/gen_gpt.py (the same network in plain PyTorch): logits, loss and
// every gradient, tied and untied heads, dropout in train/eval, GPT-2 init, generate() against
// PyTorch's greedy and sampled continuations; xtrain.model.attention (multiscale with windows as
// long as the context, and dense through a named kernel, are that same network).
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

#include "models/model_fixture.h"
#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/models/generate.h"
#include "xtrain/models/gpt.h"
#include "xtrain/nn/losses.h"
#include "xtrain/nn/multiscale_attention.h"

namespace xtrain::models::gpt_test {
namespace {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;
using xtrain::testing::load_parameters;
using xtrain::testing::with_prefix;
using Fixture = std::map<std::string, at::Tensor>;

const Fixture& fixture() {
  static const Fixture fx = xtrain::testing::load_tensors("gpt.pt");
  return fx;
}

ModelOptions fixture_options(bool tied = true, double dropout = 0.0) {
  const auto cfg = fixture().at("config");  // L, C, NH, T, V, B
  ModelOptions o;
  o.layers = cfg[0].item<int64_t>();
  o.d_model = cfg[1].item<int64_t>();
  o.heads = cfg[2].item<int64_t>();
  o.seq_len = cfg[3].item<int64_t>();
  o.vocab = cfg[4].item<int64_t>();
  o.tie_embeddings = tied;
  o.dropout = dropout;
  return o;
}

GPT reference_gpt(bool tied = true, double dropout = 0.0) {
  GPT gpt(fixture_options(tied, dropout));
  auto weights = with_prefix(fixture(), "param.");
  if (!tied) weights["lm_head.weight"] = fixture().at("untied.param.lm_head.weight");
  load_parameters(*gpt, weights);
  return gpt;
}

at::Tensor lm_loss(const at::Tensor& logits) {
  return nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), fixture().at("targets").reshape({-1}));
}

// fp32 on both sides, but different op sequences (baddbmm with α vs matmul then scale, fused vs
// separate bias adds, oneDNN's GEMM blocking vs OpenBLAS's): observed logits within 1.5e-6 absolute
// (|logit| <= 1), gradients within 8e-8 absolute (|g| <= 0.7). 1e-4 relative + 5e-6 absolute for
// logits (1e-6 for gradients) allows other blockings and still fails by 20x on a swapped GELU
// approximation (1e-4 absolute).
constexpr double kRtol = 1e-4;
constexpr double kGradAtol = 1e-6;  // floor for gradient entries that cancel to ~0
constexpr double kLogitAtol = 5e-6;

TEST(Gpt, MatchesPyTorchLogitsLossAndEveryGradient) {
  auto gpt = reference_gpt();
  const auto logits = gpt->forward(fixture().at("idx"));
  expect_close(logits, fixture().at("logits"), kRtol, kLogitAtol, "logits");
  const auto loss = lm_loss(logits);
  expect_close(loss, fixture().at("loss"), kRtol, 0, "loss");
  loss.backward();
  int64_t checked = 0;
  for (const auto& p : gpt->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    expect_close(p.value().grad(), fixture().at("grad." + p.key()), kRtol, kGradAtol, "grad of " + p.key());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int64_t>(with_prefix(fixture(), "grad.").size()));
}

TEST(Gpt, UntiedHeadMatchesPyTorch) {
  auto gpt = reference_gpt(/*tied=*/false);
  const auto logits = gpt->forward(fixture().at("idx"));
  expect_close(logits, fixture().at("untied.logits"), kRtol, kLogitAtol, "untied logits");
  const auto loss = lm_loss(logits);
  expect_close(loss, fixture().at("untied.loss"), kRtol, 0, "untied loss");
  loss.backward();
  expect_close(gpt->wte->weight.grad(), fixture().at("untied.grad.wte.weight"), kRtol, kGradAtol, "untied wte grad");
  expect_close(gpt->lm_head->weight.grad(), fixture().at("untied.grad.lm_head.weight"), kRtol, kGradAtol,
               "lm_head grad");
}

TEST(Gpt, TiedHeadHasNoParameterAndItsGradientSumsBothUses) {
  auto tied = reference_gpt();
  for (const auto& p : tied->named_parameters()) EXPECT_EQ(p.key().find("lm_head"), std::string::npos) << p.key();
  // An untied twin whose head equals wte: the tied wte gradient is its lookup + head gradients.
  auto untied = reference_gpt(/*tied=*/false);
  {
    at::NoGradGuard no_grad;
    untied->lm_head->weight.copy_(untied->wte->weight);
  }
  EXPECT_EQ(untied->named_parameters().size(), tied->named_parameters().size() + 1);
  lm_loss(tied->forward(fixture().at("idx"))).backward();
  lm_loss(untied->forward(fixture().at("idx"))).backward();
  // Same graph and values, only the final sum differs: fp32 rounding of one addition.
  expect_close(tied->wte->weight.grad(), untied->wte->weight.grad() + untied->lm_head->weight.grad(), 1e-5, 1e-8,
               "tied wte grad vs lookup + head");
}

TEST(Gpt, DropoutZeroIsDeterministicInTrainMode) {
  auto gpt = reference_gpt();
  gpt->train();
  expect_equal(gpt->forward(fixture().at("idx")), gpt->forward(fixture().at("idx")), "two train forwards");
}

TEST(Gpt, DropoutActsInTrainModeOnlyAndEvalEqualsNoDropout) {
  auto plain = reference_gpt(true, 0.0);
  auto dropped = reference_gpt(true, 0.3);
  const auto& idx = fixture().at("idx");
  const auto reference = plain->forward(idx);
  dropped->train();
  const auto a = dropped->forward(idx), b = dropped->forward(idx);
  EXPECT_FALSE(at::allclose(a, reference)) << "train mode must apply dropout";
  EXPECT_FALSE(at::allclose(a, b)) << "two dropout masks must differ";
  dropped->eval();
  expect_equal(dropped->forward(idx), reference, "eval with dropout 0.3 vs dropout 0");
}

// With dropout every mask is drawn from the default generator, so re-seeding it before each forward
// fixes the masks; then the loss is a smooth function of the parameters and autograd's derivative
// along a random direction, one parameter tensor at a time, must equal the central finite
// difference (fp32 loss: ~1e-3 relative noise at this step). Catches a mask regenerated
// differently in backward (the fused dropout and attention kernels).
TEST(Gpt, DropoutGradientsEqualFiniteDifferencesUnderFixedMasks) {
  models::ModelOptions o;
  o.layers = 2;
  o.d_model = 32;
  o.heads = 2;
  o.seq_len = 24;
  o.vocab = 40;
  o.dropout = 0.3;
  torch::manual_seed(5);
  models::GPT gpt(o);
  gpt->train();
  const auto idx = at::randint(0, 40, {3, 24});
  const auto target = at::randint(0, 40, {3, 24});
  auto loss = [&]() {
    torch::manual_seed(77);  // the same masks every time
    auto logits = gpt->forward(idx);
    return at::cross_entropy_loss(logits.reshape({-1, 40}), target.reshape({-1}));
  };
  loss().backward();
  torch::manual_seed(9);
  for (auto& p : gpt->named_parameters()) {
    const auto d = at::randn(p.value().sizes());
    const double analytic = (p.value().grad() * d).sum().item<double>();
    const double eps = 1e-2 / std::sqrt(static_cast<double>(d.numel()));
    at::NoGradGuard no_grad;
    p.value().add_(d, eps);
    const double up = loss().item<double>();
    p.value().add_(d, -2 * eps);
    const double down = loss().item<double>();
    p.value().add_(d, eps);
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 2e-2 * std::abs(numeric) + 2e-3) << p.key();
  }
}

TEST(Gpt, InitIsGpt2AndDeterministicGivenTheSeed) {
  ModelOptions o;  // the default GPT: L4, C256, NH4, T256, V256
  torch::manual_seed(7);
  GPT a(o);
  torch::manual_seed(7);
  GPT b(o);
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) expect_equal(pa[i].value(), pb[i].value(), pa[i].key());
  // 65536+ samples each: the std estimate is within ~0.5% of the truth; allow 3%.
  const double residual = 0.02 / std::sqrt(2.0 * o.layers);
  for (const auto& p : a->named_parameters()) {
    const auto& name = p.key();
    const auto& t = p.value();
    if (name.find("ln") != std::string::npos) {
      EXPECT_TRUE(at::all(t == (name.find("weight") != std::string::npos ? 1 : 0)).item<bool>()) << name;
    } else if (name.find("bias") != std::string::npos) {
      EXPECT_EQ(t.abs().max().item<float>(), 0.0f) << name;
    } else {
      const bool proj = name.find("attn.proj.weight") != std::string::npos || name.find("mlp.proj.weight") != std::string::npos;
      EXPECT_NEAR(t.std().item<double>(), proj ? residual : 0.02, 0.03 * (proj ? residual : 0.02)) << name;
      EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.02 * 0.05) << name;
    }
  }
}

template <class F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

TEST(Gpt, RejectsBadShapesWithTheConfigKey) {
  auto gpt = reference_gpt();
  const auto long_input = at::zeros({1, fixture_options().seq_len + 1}, at::kLong);
  EXPECT_NE(usage_error([&] { gpt->forward(long_input); }).find("xtrain.model.seq_len"), std::string::npos);
  ModelOptions o = fixture_options();
  o.heads = 5;
  const auto heads = usage_error([&] { GPT g(o); });
  EXPECT_NE(heads.find("xtrain.model.heads"), std::string::npos) << heads;
  EXPECT_NE(heads.find("d_model"), std::string::npos) << heads;
  o = fixture_options();
  o.attention.type = "sparse";
  EXPECT_NE(usage_error([&] { GPT g(o); }).find("xtrain.model.attention.type"), std::string::npos);
  o.attention.type = "multiscale";
  o.attention.windows = {8, 16, 32};  // 4 heads split 2, 1, 1 (the README's multi-scale example)
  EXPECT_NO_THROW(GPT ok(o));
  o.attention.windows = {2, 4, 8, 16, 32};  // a window without a head
  const auto groups = usage_error([&] { GPT g(o); });
  EXPECT_NE(groups.find("heads (4)"), std::string::npos) << groups;
  EXPECT_NE(groups.find("xtrain.model.attention.windows"), std::string::npos) << groups;
  o.attention.windows = {8, 0};
  EXPECT_NE(usage_error([&] { GPT g(o); }).find("windows[1] = 0"), std::string::npos);
  o.attention.windows = {8, 16};
  o.attention.kernel = "ms_fused_cpux";
  GPT typo(o);
  const auto kernel = usage_error([&] { typo->forward(fixture().at("idx")); });
  EXPECT_NE(kernel.find("did you mean 'ms_fused_cpu'"), std::string::npos) << kernel;
}

GPT gpt_with_attention(const std::string& type, std::vector<int64_t> windows, const std::string& kernel = "auto") {
  ModelOptions o = fixture_options();
  o.attention.type = type;
  o.attention.windows = std::move(windows);
  o.attention.kernel = kernel;
  GPT gpt(o);
  load_parameters(*gpt, with_prefix(fixture(), "param."));  // same names and shapes as dense
  return gpt;
}

void expect_fixture_logits_and_gradients(GPT& gpt, const std::string& what) {
  const auto logits = gpt->forward(fixture().at("idx"));
  expect_close(logits, fixture().at("logits"), kRtol, kLogitAtol, what + " logits");
  lm_loss(logits).backward();
  for (const auto& p : gpt->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << what << " " << p.key();
    expect_close(p.value().grad(), fixture().at("grad." + p.key()), kRtol, kGradAtol, what + " grad of " + p.key());
  }
}

// A window >= seq_len (16) puts every earlier position of every query in level 0: multi-scale
// attention is then exactly dense causal attention, so the PyTorch fixture applies unchanged (the
// fused kernel's online softmax rounds differently: the same fp32 tolerances hold).
TEST(Gpt, MultiscaleWithWindowsAsLongAsTheContextMatchesPyTorch) {
  for (const auto& windows : {std::vector<int64_t>{16}, std::vector<int64_t>{16, 40}}) {
    auto gpt = gpt_with_attention("multiscale", windows);
    expect_fixture_logits_and_gradients(gpt, "multiscale windows " + std::to_string(windows.size()));
  }
}

TEST(Gpt, DenseThroughANamedKernelMatchesPyTorch) {
  for (const std::string kernel : {"dense_flash_cpu", "dense_composite"}) {
    auto gpt = gpt_with_attention("dense", {}, kernel);
    expect_fixture_logits_and_gradients(gpt, kernel);
  }
}

// Windows 2 and 4 (two heads each): queries 0-2 still see every position one by one in both
// groups (dense logits), query 3 on pools [0, 2) in the window-2 heads (different logits); every
// block runs the fused multi-scale kernel, and no logit depends on a later token.
TEST(Gpt, MultiscaleWithShortWindowsPoolsAndStaysCausal) {
  auto gpt = gpt_with_attention("multiscale", {2, 4});
  for (size_t i = 0; i < gpt->blocks->size(); ++i) {
    auto* attn = gpt->blocks[i]->as<nn::BlockImpl>()->attn.ptr()->as<nn::MultiScaleAttentionImpl>();
    ASSERT_NE(attn, nullptr) << "blocks." << i << ".attn";
    EXPECT_EQ(attn->windows(), (std::vector<int64_t>{2, 4}));
    EXPECT_EQ(attn->kernel_for(at::zeros({2, 16, 32})), "ms_fused_cpu");
  }
  const auto& idx = fixture().at("idx");
  const auto logits = gpt->forward(idx);
  const auto& dense = fixture().at("logits");
  expect_close(logits.narrow(1, 0, 3), dense.narrow(1, 0, 3), kRtol, kLogitAtol, "positions 0-2");
  EXPECT_GT((logits.narrow(1, 3, 1) - dense.narrow(1, 3, 1)).abs().max().item<double>(), 1e-4) << "position 3";
  auto changed = idx.clone();
  changed.select(1, 10).add_(1).remainder_(fixture_options().vocab);
  const auto after = gpt->forward(changed);
  expect_close(after.narrow(1, 0, 10), logits.narrow(1, 0, 10), 1e-6, 1e-7, "positions before the change");
  EXPECT_GT((after.select(1, 10) - logits.select(1, 10)).abs().max().item<double>(), 1e-4) << "position 10";
}

std::vector<int64_t> to_vector(const at::Tensor& t) {
  const auto c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

TEST(Generate, TopKOneIsPyTorchsGreedyContinuation) {
  auto gpt = reference_gpt();
  const auto prompt = to_vector(fixture().at("gen.prompt"));
  const auto expected = to_vector(fixture().at("gen.greedy"));
  // prompt 5 + 24 new > seq_len 16: the context is cropped; the fixture's top-1 margins >= 0.07.
  EXPECT_EQ(generate(gpt, prompt, static_cast<int64_t>(expected.size()), 1.0, 1, /*seed=*/99), expected);
}

TEST(Generate, SamplingMatchesPyTorchAndDependsOnlyOnTheSeed) {
  auto gpt = reference_gpt();
  const auto prompt = to_vector(fixture().at("gen.prompt"));
  const auto expected = to_vector(fixture().at("gen.sample"));
  const auto n = static_cast<int64_t>(expected.size());
  // torch.multinomial with torch.Generator().manual_seed(4321), temperature 0.8, top_k 10.
  const auto a = generate(gpt, prompt, n, 0.8, 10, 4321);
  EXPECT_EQ(a, expected);
  EXPECT_EQ(generate(gpt, prompt, n, 0.8, 10, 4321), a);
  EXPECT_NE(generate(gpt, prompt, n, 0.8, 10, 4322), a);
}

TEST(Generate, RestoresTheTrainingFlag) {
  auto gpt = reference_gpt(true, 0.3);
  gpt->train();
  generate(gpt, {1, 2, 3}, 2, 1.0, 0, 1);
  EXPECT_TRUE(gpt->is_training());
  gpt->eval();
  generate(gpt, {1, 2, 3}, 2, 1.0, 0, 1);
  EXPECT_FALSE(gpt->is_training());
  EXPECT_NE(usage_error([&] { generate(gpt, {1}, 1, 0.0, 0, 1); }).find("temperature"), std::string::npos);
  EXPECT_NE(usage_error([&] { generate(gpt, {}, 1, 1.0, 0, 1); }).find("prompt"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::models::gpt_test
