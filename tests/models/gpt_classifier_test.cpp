// gpt_classifier: GPT's parameter names (an LM's weights load by name), the pooled head against
// GPT's own hidden states (causal trunk), the encoder against a float64 transformer written here
// in plain ATen ops (bidirectional attention, padding zeroed), and the args checks.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_classifier.h"
#include "xtrain/models/registry.h"

namespace xtrain::models::gpt_classifier_test {
namespace {

ModelOptions tiny(bool causal, const std::string& pool) {
  ModelOptions o;
  o.type = "gpt_classifier";
  o.layers = 2;
  o.d_model = 16;
  o.heads = 2;
  o.seq_len = 8;
  o.vocab = 11;
  o.num_classes = 3;
  o.args = {{"causal", causal}, {"pool", pool}};
  return o;
}

std::map<std::string, at::Tensor> params(const torch::nn::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().detach().to(at::kDouble);
  return out;
}

TEST(GptClassifier, TrunkHasGptNamesAndShapes) {
  torch::manual_seed(3);
  GPT gpt(tiny(true, "mean"));
  torch::manual_seed(3);
  GptClassifier cls(tiny(false, "mean"));
  const auto g = params(*gpt), c = params(*cls);
  for (const auto& [name, t] : g) {
    ASSERT_TRUE(c.count(name)) << name;
    EXPECT_TRUE(c.at(name).equal(t)) << name << ": the same seed gives GPT's init, encoder or not";
  }
  EXPECT_EQ(c.size(), g.size() + 2);
  EXPECT_EQ(c.at("classifier.weight").sizes(), (std::vector<int64_t>{3, 16}));
  EXPECT_EQ(c.count("lm_head.weight"), 0u);
}

// Causal trunk: the pooled logits are GPT's hidden states (its own forward) pooled, times the head.
TEST(GptClassifier, CausalPoolsMatchGptHiddenStates) {
  at::NoGradGuard no_grad;
  const auto idx = at::tensor({1, 4, 2, 9, 3, -1, -1, -1, 5, 6, 7, 8, 1, 2, 3, 4}, at::kLong).view({2, 8});
  for (const std::string pool : {"mean", "last"}) {
    torch::manual_seed(5);
    GPT gpt(tiny(true, pool));
    torch::manual_seed(5);
    GptClassifier cls(tiny(true, pool));
    const auto w = cls->classifier->weight, b = cls->classifier->bias;
    // Row 0 has 5 real tokens: right padding cannot reach them through causal attention.
    const auto h0 = gpt->hidden(idx.slice(0, 0, 1).slice(1, 0, 5))[0];
    const auto h1 = gpt->hidden(idx.slice(0, 1, 2))[0];
    const auto p0 = pool == "mean" ? h0.mean(0) : h0[4];
    const auto p1 = pool == "mean" ? h1.mean(0) : h1[7];
    const auto expected = at::stack({p0, p1}).matmul(w.t()) + b;
    testing::expect_close(cls->forward(idx), expected, 1e-5, 1e-6, "pool " + pool);  // fp32 reassociation
  }
}

// One pre-LN block in float64 ATen ops, attention over every position (no mask).
at::Tensor block_reference(const at::Tensor& x, const std::map<std::string, at::Tensor>& p, int64_t i, int64_t heads) {
  const auto k = [&](const std::string& n) { return p.at("blocks." + std::to_string(i) + "." + n); };
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / heads;
  const auto ln1 = at::layer_norm(x, {C}, k("ln1.weight"), k("ln1.bias"), 1e-5);
  const auto qkv = at::linear(ln1, k("attn.qkv.weight"), k("attn.qkv.bias")).view({B, T, 3, heads, hs});
  const auto q = qkv.select(2, 0).transpose(1, 2), kk = qkv.select(2, 1).transpose(1, 2), v = qkv.select(2, 2).transpose(1, 2);
  const auto att = at::softmax(q.matmul(kk.transpose(-1, -2)) / std::sqrt(static_cast<double>(hs)), -1);
  const auto y = att.matmul(v).transpose(1, 2).reshape({B, T, C});
  const auto h = x + at::linear(y, k("attn.proj.weight"), k("attn.proj.bias"));
  const auto ln2 = at::layer_norm(h, {C}, k("ln2.weight"), k("ln2.bias"), 1e-5);
  const auto fc = at::gelu(at::linear(ln2, k("mlp.fc.weight"), k("mlp.fc.bias")), "tanh");
  return h + at::linear(fc, k("mlp.proj.weight"), k("mlp.proj.bias"));
}

TEST(GptClassifier, EncoderMatchesBidirectionalReference) {
  at::NoGradGuard no_grad;
  torch::manual_seed(7);
  GptClassifier cls(tiny(false, "mean"));
  const auto p = params(*cls);
  const auto idx = at::tensor({1, 4, 2, 9, 3, -1, -1, -1, 5, 6, 7, 8, 1, 2, 3, 4}, at::kLong).view({2, 8});
  const auto real = idx.ge(0).unsqueeze(-1).to(at::kDouble);
  auto x = (at::embedding(p.at("wte.weight"), idx.clamp_min(0)) + p.at("wpe.weight")) * real;
  for (int64_t i = 0; i < 2; ++i) x = block_reference(x, p, i, 2);
  x = at::layer_norm(x, {16}, p.at("ln_f.weight"), p.at("ln_f.bias"), 1e-5);
  const auto pooled = (x * real).sum(1) / real.sum(1);
  const auto expected = at::linear(pooled, p.at("classifier.weight"), p.at("classifier.bias"));
  testing::expect_close(cls->forward(idx).to(at::kDouble), expected, 1e-4, 1e-5, "encoder logits");  // fp32 vs fp64
}

TEST(GptClassifier, ArgsAreChecked) {
  auto o = tiny(false, "max");
  EXPECT_THROW(check_model_options(o), UsageError);
  o.args = {{"pooling", "mean"}};
  try {
    check_model_options(o);
    FAIL() << "unknown arg accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.model.args.pooling"), std::string::npos) << e.what();
  }
  o.args = {{"causal", "yes"}};
  EXPECT_THROW(check_model_options(o), UsageError);
  o.args = nlohmann::json::object();
  o.num_classes = 0;
  EXPECT_THROW(build_model(o), UsageError);
  EXPECT_EQ(find_model("gpt_classifier").task, "classify");
}

}  // namespace
}  // namespace xtrain::models::gpt_classifier_test
