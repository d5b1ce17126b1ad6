// MultiScaleAttention and make_attention: the module equals qkv -> the dense masked reference ->
// proj (forward and parameter gradients), is causal, has CausalSelfAttention's parameter names
// (weights load either way), and reports bad arguments by name; make_attention builds what the
// config asks for (and names xtrain.model.attention.type when it cannot); dropout acts in training
// only.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/kernels/ms_attention/reference.h"
#include "xtrain/nn/attention_factory.h"
#include "xtrain/nn/causal_self_attention.h"
#include "xtrain/nn/multiscale_attention.h"

namespace xtrain::nn::multiscale_attention_test {
namespace {

using xtrain::testing::expect_close;

// The module's math written out with the reference kernel, in float64.
at::Tensor reference_forward(MultiScaleAttentionImpl& m, const at::Tensor& x, bool causal) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), NH = 4, HS = C / NH;
  const auto qkv = at::linear(x, m.qkv->weight, m.qkv->bias).view({B, T, 3, NH, HS}).permute({2, 0, 3, 1, 4});
  const auto y = kernels::ms_attention::ms_attention_reference(qkv[0], qkv[1], qkv[2], m.windows(), causal);
  return at::linear(y.transpose(1, 2).reshape({B, T, C}), m.proj->weight, m.proj->bias);
}

TEST(MultiScaleAttention, EqualsReferenceForwardAndParameterGradients) {
  for (bool causal : {true, false}) {
    torch::manual_seed(21);
    MultiScaleAttention m(32, 4, {4, 8}, causal, 0.0);
    m->to(at::kDouble);
    const auto x = at::randn({2, 37, 32}, at::kDouble);
    const auto y = m->forward(x);
    EXPECT_EQ(m->kernel_for(x), "ms_fused_cpu");
    const auto w = at::randn_like(y);
    (y * w).sum().backward();
    std::vector<at::Tensor> fused_grads;
    for (auto& p : m->parameters()) fused_grads.push_back(p.grad().clone());
    m->zero_grad();
    const auto r = reference_forward(*m, x, causal);
    (r * w).sum().backward();
    expect_close(y, r, 1e-10, 1e-12, "forward");  // float64 both ways
    const auto params = m->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      expect_close(fused_grads[i], params[i].grad(), 1e-9, 1e-11, "grad " + std::to_string(i));
    }
  }
}

TEST(MultiScaleAttention, IsCausal) {
  torch::manual_seed(22);
  MultiScaleAttention m(16, 2, {2, 4});
  const auto x = at::randn({1, 40, 16});
  auto changed = x.clone();
  changed.select(1, 30).normal_();
  const auto a = m->forward(x), b = m->forward(changed);
  expect_close(a.narrow(1, 0, 30), b.narrow(1, 0, 30), 0, 1e-6, "positions before the change");
  EXPECT_FALSE(at::allclose(a.narrow(1, 30, 10), b.narrow(1, 30, 10)));
}

TEST(MultiScaleAttention, SameParameterNamesAsCausalSelfAttention) {
  MultiScaleAttention ms(16, 4, {8, 16});
  CausalSelfAttention dense(16, 4, 8, 0.0);
  const auto a = ms->named_parameters().keys(), b = dense->named_parameters().keys();
  EXPECT_EQ(a, b);
  // Dense weights load into the multi-scale module.
  for (auto& p : ms->named_parameters()) p.value().data().copy_(dense->named_parameters()[p.key()]);
}

// A window of at least T puts every earlier position of every query on level 0 (segments of one,
// bias log 1 = 0): multi-scale attention is then exactly dense causal attention.
TEST(MultiScaleAttention, AWindowAsLongAsTheSequenceIsDenseAttention) {
  torch::manual_seed(23);
  CausalSelfAttention dense(32, 4, 50, 0.0);
  MultiScaleAttention ms(32, 4, {64, 50}, true, 0.0);
  for (auto& p : ms->named_parameters()) p.value().data().copy_(dense->named_parameters()[p.key()]);
  const auto x = at::randn({2, 50, 32});
  expect_close(ms->forward(x), dense->forward(x), 1e-5, 1e-6, "windows >= T vs CausalSelfAttention");
}

TEST(MultiScaleAttention, BadArgumentsNameTheArgument) {
  const auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no UsageError";
  };
  EXPECT_NE(message([] { MultiScaleAttention(32, 4, {2, 4, 8, 16, 32}); }).find("heads (4)"), std::string::npos);
  EXPECT_NO_THROW(MultiScaleAttention(32, 4, {8, 16, 32}));  // groups of 2, 1, 1 heads
  EXPECT_NE(message([] { MultiScaleAttention(32, 4, {0, 8}); }).find("windows[0] = 0"), std::string::npos);
  EXPECT_NE(message([] { MultiScaleAttention(30, 4, {8}); }).find("d_model (30)"), std::string::npos);
  EXPECT_NE(message([] { MultiScaleAttention(32, 4, {8}, true, 1.0); }).find("dropout"), std::string::npos);
  MultiScaleAttention m(32, 4, {8});
  EXPECT_NE(message([&] { m->forward(at::randn({2, 5, 16})); }).find("[B, T, 32], got [2, 5, 16]"), std::string::npos);
  MultiScaleAttention named(32, 4, {8}, true, 0.0, "ms_fused_cpux");
  EXPECT_NE(message([&] { named->forward(at::randn({2, 5, 32})); }).find("did you mean 'ms_fused_cpu'"),
            std::string::npos);
}

TEST(MakeAttention, BuildsWhatTheConfigAsks) {
  AttentionOptions o;
  auto dense = make_attention(32, 4, 64, 0.0, o);
  EXPECT_NE(dense.ptr()->as<CausalSelfAttentionImpl>(), nullptr);
  o.kernel = "dense_flash_cpu";
  auto flash = make_attention(32, 4, 64, 0.0, o);
  ASSERT_NE(flash.ptr()->as<MultiScaleAttentionImpl>(), nullptr);
  EXPECT_TRUE(flash.ptr()->as<MultiScaleAttentionImpl>()->windows().empty());
  o.type = "multiscale";
  o.windows = {8, 16};
  o.kernel = "auto";
  auto ms = make_attention(32, 4, 64, 0.0, o);
  ASSERT_NE(ms.ptr()->as<MultiScaleAttentionImpl>(), nullptr);
  EXPECT_EQ(ms.ptr()->as<MultiScaleAttentionImpl>()->windows(), (std::vector<int64_t>{8, 16}));
  const auto x = at::randn({2, 20, 32});
  EXPECT_EQ(ms.forward(x).sizes(), x.sizes());
  EXPECT_EQ(flash.forward(x).sizes(), x.sizes());
  o.windows = {2, 4, 8, 16, 32};  // 5 windows, 4 heads
  try {
    make_attention(32, 4, 64, 0.0, o);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.model.attention.windows"), std::string::npos) << e.what();
  }
  o.type = "sparse";
  try {
    make_attention(32, 4, 64, 0.0, o);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.model.attention.type"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"sparse\""), std::string::npos) << e.what();
  }
}

// Dropout on the attention weights and the output: two training passes differ, evaluation equals
// the same weights without dropout.
TEST(MultiScaleAttention, DropoutActsInTrainingOnly) {
  torch::manual_seed(24);
  MultiScaleAttention plain(32, 4, {4, 8}, true, 0.0);
  MultiScaleAttention dropped(32, 4, {4, 8}, true, 0.3);
  for (auto& p : dropped->named_parameters()) p.value().data().copy_(plain->named_parameters()[p.key()]);
  const auto x = at::randn({2, 40, 32});
  const auto reference = plain->forward(x);
  dropped->train();
  const auto a = dropped->forward(x), b = dropped->forward(x);
  EXPECT_FALSE(at::allclose(a, reference)) << "training must apply dropout";
  EXPECT_FALSE(at::allclose(a, b)) << "two dropout masks must differ";
  dropped->eval();
  expect_close(dropped->forward(x), reference, 0, 0, "eval with dropout 0.3 vs dropout 0");
}

}  // namespace
}  // namespace xtrain::nn::multiscale_attention_test
