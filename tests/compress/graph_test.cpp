// The traced graph against the modules it was read from: run_graph in float equals each model's
// own forward (GPT, ResNet-18 with BatchNorm in eval, MLP); the converted int8 executor equals a
// float computation on the dequantised values (the QDQ reference the ONNX export writes); a ViT
// (dense and multi-scale) traces, runs in float equal to its forward, and converts to int8; QAT's
// fake-quantised forward reaches the module's parameters; an unknown layer is named.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/graph/trace.h"
#include "xtrain/compress/quant/quantize.h"
#include "xtrain/models/factory.h"
#include "xtrain/nn/linear.h"

namespace xtrain::compress::graph_test {
namespace {

using xtrain::testing::expect_close;

models::Model small_gpt() {
  models::ModelOptions o;
  o.layers = 2, o.d_model = 32, o.heads = 4, o.seq_len = 16, o.vocab = 64;
  at::manual_seed(1);
  return models::build_model(o);
}

models::Model small_mlp() {
  models::ModelOptions o;
  o.type = "mlp", o.in_features = 64, o.hidden = {32, 24}, o.num_classes = 10;
  at::manual_seed(2);
  return models::build_model(o);
}

models::Model small_resnet() {
  models::ModelOptions o;
  o.type = "resnet18", o.num_classes = 10;
  at::manual_seed(3);
  auto m = models::build_model(o);
  at::NoGradGuard no_grad;
  for (auto& b : m.module->named_buffers()) {  // non-trivial BatchNorm statistics
    if (b.key().find("running_mean") != std::string::npos) b.value().copy_(at::randn(b.value().sizes()) * 0.1);
    if (b.key().find("running_var") != std::string::npos) b.value().copy_(at::rand(b.value().sizes()) + 0.5);
  }
  m.module->eval();
  return m;
}

TEST(Graph, FloatExecutionEqualsForwardForEachModel) {
  at::NoGradGuard no_grad;
  {
    auto m = small_gpt();
    m.module->eval();
    const auto idx = at::randint(0, 64, {2, 11}, at::kLong);  // T < seq_len
    const auto g = trace(*m.module);
    EXPECT_EQ(g.input_kind, "tokens");
    // Same ops in the same order: equal up to the attention kernel's summation order.
    expect_close(run_graph(g, idx), m.forward(idx), 1e-5, 1e-5, "gpt");
  }
  {
    auto m = small_mlp();
    m.module->eval();
    const auto x = at::randn({5, 1, 8, 8});
    expect_close(run_graph(trace(*m.module), x), m.forward(x), 1e-6, 1e-6, "mlp");
  }
  {
    auto m = small_resnet();
    const auto x = at::randn({2, 1, 28, 28});
    expect_close(run_graph(trace(*m.module), x), m.forward(x), 1e-5, 1e-5, "resnet18 (eval BatchNorm)");
  }
}

models::Model small_vit(const std::string& pool, const std::vector<int64_t>& windows) {
  models::ModelOptions o;
  o.type = "vit", o.layers = 2, o.d_model = 32, o.heads = 4, o.num_classes = 10;
  o.args = {{"patch", 4}, {"pool", pool}, {"image_size", 28}};  // a 7x7 grid
  if (!windows.empty()) o.attention.type = "multiscale", o.attention.windows = windows;
  at::manual_seed(4);
  auto m = models::build_model(o);
  at::NoGradGuard no_grad;
  for (auto& p : m.module->named_parameters()) {  // position and class embeddings that matter
    if (p.key() == "pos_embed" || p.key() == "cls_token") p.value().normal_(0.0, 0.5);
  }
  m.module->eval();
  return m;
}

// The ViT: patchify, patch_embed (a Linear), class token + positions, blocks (GridAttention), pool,
// head; run_graph equals the module's forward for dense + class token and multi-scale + mean/cls.
TEST(Graph, VitFloatExecutionEqualsForward) {
  at::NoGradGuard no_grad;
  const auto x = at::randn({3, 1, 28, 28});
  for (const auto& [pool, windows] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"cls", {}}, {"mean", {1, 3}}, {"cls", {2, 4}}}) {
    auto m = small_vit(pool, windows);
    const auto g = trace(*m.module);
    const std::string what = "vit " + pool + (windows.empty() ? " dense" : " multi-scale");
    EXPECT_EQ(g.model_type, "vit");
    EXPECT_EQ(g.input_kind, "image");
    EXPECT_EQ(g.sample_shape, (std::vector<int64_t>{1, 28, 28}));
    ASSERT_GE(g.nodes.size(), 4u);
    EXPECT_EQ(g.nodes[0].kind, OpKind::kPatchify);
    EXPECT_EQ(g.nodes[1].name, "patch_embed");
    EXPECT_EQ(g.nodes[2].kind, OpKind::kTokensPos);
    int grid_attention = 0;
    for (const auto& n : g.nodes) {
      if (n.kind != OpKind::kGridAttention) continue;
      ++grid_attention;
      EXPECT_EQ(n.windows, windows);
      EXPECT_EQ(n.grid_h, 7);
      EXPECT_EQ(n.cls_token, pool == "cls");
    }
    EXPECT_EQ(grid_attention, 2) << what;
    EXPECT_EQ(g.nodes[g.nodes.size() - 2].kind, OpKind::kPoolTokens);
    expect_close(run_graph(g, x), m.forward(x), 1e-5, 1e-5, what);
  }
}

// int8 on a ViT: its Linear layers quantise (the token ops run in float) and the result stays
// close to fp32.
TEST(Graph, VitConvertsToInt8) {
  at::NoGradGuard no_grad;
  auto m = small_vit("mean", {1, 3});
  auto q = wrap(m, {});
  at::manual_seed(9);
  const auto calib = at::randn({8, 1, 28, 28});
  calibrate(q, [&](int64_t i) { return calib.narrow(0, i * 4, 4); }, 2);
  convert(q);
  int quantised = 0;
  for (size_t i = 0; i < q.graph->nodes.size(); ++i) quantised += q.plan->at(i).enabled ? 1 : 0;
  EXPECT_EQ(quantised, 10);  // patch_embed, 2 x (qkv, proj, fc, proj), head
  const auto fp32 = m.forward(calib), int8 = q.model.forward(calib);
  const double rel = ((int8 - fp32).norm() / fp32.norm()).item<double>();
  EXPECT_GT(rel, 0.0);
  EXPECT_LT(rel, 0.1);
}

// The int8 executor on every quantised layer against the same graph run in float with each
// quantised layer's input and weight replaced by their dequantised values (the QDQ semantics).
at::Tensor qdq_reference(const Graph& g, const QuantPlan& plan, const at::Tensor& x) {
  std::vector<at::Tensor> values(g.num_values);
  values[0] = x;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const auto& l = plan.at(i);
    at::Tensor out;
    if (l.enabled && (n.kind == OpKind::kLinear || n.kind == OpKind::kConv2d)) {
      const auto& in = values[n.inputs[0]];
      const auto xd = dequantize_per_tensor(quantize_per_tensor(in, l.act), l.act).to(at::kDouble);
      if (n.kind == OpKind::kLinear) {
        const auto wd = dequantize_per_channel(l.linear->weight()).to(at::kDouble);
        out = at::linear(xd, wd, n.bias.defined() ? n.bias.detach().to(at::kDouble) : at::Tensor());
      } else {
        const auto wd = dequantize_per_channel(l.conv->weight()).to(at::kDouble);
        out = at::conv2d(xd, wd, l.conv->bias().to(at::kDouble), {n.stride[0], n.stride[1]},
                         {n.padding[0], n.padding[1]});
      }
      if (n.relu) out = out.relu();
      out = out.to(at::kFloat);
    } else {
      // Any other node in float32 through the interpreter, as a one-node graph over its inputs.
      Graph one;
      one.nodes = {n};
      Node& m = one.nodes[0];
      for (size_t k = 0; k < m.inputs.size(); ++k) m.inputs[k] = static_cast<int>(k) + 1;
      one.num_values = static_cast<int>(m.inputs.size()) + 2;
      m.output = one.output = one.num_values - 1;
      // run_graph takes one input (value 0); an Add reads values 1 and 2, fed here directly.
      if (m.inputs.size() == 1) {
        m.inputs[0] = 0;
        out = run_graph(one, values[n.inputs[0]]);
      } else {
        out = values[n.inputs[0]] + values[n.inputs[1]];
      }
    }
    values[n.output] = out;
  }
  return values[g.output];
}

TEST(Graph, ConvertedMlpEqualsDequantisedReference) {
  at::NoGradGuard no_grad;
  auto m = small_mlp();
  m.module->eval();
  QuantOptions o;
  auto q = wrap(m, o, TraceHints{{1, 8, 8}});
  at::manual_seed(7);
  std::vector<at::Tensor> calib;
  for (int i = 0; i < 4; ++i) calib.push_back(at::randn({16, 1, 8, 8}));
  calibrate(q, [&](int64_t i) { return calib[i]; }, 4);
  convert(q);
  EXPECT_EQ(q.plan->num_enabled(), 3);
  const auto x = calib[0];
  const auto y = q.model.forward(x);
  const auto ref = qdq_reference(*q.graph, *q.plan, x);
  // Each layer's float output can differ in the last ulp; the next layer's re-quantisation may then
  // round one value the other way (a tie): allow one step of the head's input on a few outputs.
  const auto diff = (y - ref).abs();
  const float step = q.plan->at(q.graph->nodes.size() - 1).act.scale;
  const double head_w = q.graph->nodes.back().weight.abs().max().item<double>();
  EXPECT_LE(diff.max().item<double>(), step * head_w + 1e-5) << "largest error at " << diff.argmax().item<int64_t>();
  EXPECT_GE(diff.le(1e-4).to(at::kFloat).mean().item<double>(), 0.98);
  // ... and the quantised model stays close to the float model (a sanity bound, not a parity check).
  EXPECT_LT((y - m.forward(x)).abs().max().item<double>(), 0.1);
}

TEST(Graph, ConvertedResNetConvEqualsDequantisedReference) {
  at::NoGradGuard no_grad;
  auto m = small_resnet();
  QuantOptions o;
  o.op_names = {"conv1"};  // one conv: the comparison is then exact up to one re-quantisation
  auto q = wrap(m, o, TraceHints{{1, 28, 28}});
  at::manual_seed(8);
  const auto x = at::randn({2, 1, 28, 28});
  calibrate(q, [&](int64_t) { return x; }, 1);
  convert(q);
  ASSERT_EQ(q.plan->num_enabled(), 1);
  const auto y = q.model.forward(x);
  const auto ref = qdq_reference(*q.graph, *q.plan, x);
  // Downstream float layers amplify the first layer's ulp-level differences a little.
  expect_close(y, ref, 1e-3, 1e-3, "resnet18 with int8 conv1");
}

TEST(Graph, DynamicGptRunsAndStaysClose) {
  at::NoGradGuard no_grad;
  auto m = small_gpt();
  m.module->eval();
  QuantOptions o;
  o.mode = "dynamic";
  auto q = wrap(m, o);
  convert(q);
  const auto idx = at::randint(0, 64, {2, 16}, at::kLong);
  const auto y = q.model.forward(idx);
  const auto ref = m.forward(idx);
  ASSERT_EQ(y.sizes(), ref.sizes());
  // int8 weights and activations on a 2-layer GPT with 0.02-scale weights: logits within a few 1e-2.
  EXPECT_LT((y - ref).abs().max().item<double>(), 0.05);
}

TEST(Graph, QatForwardIsFakeQuantisedAndTrainsTheModuleParameters) {
  auto m = small_mlp();
  m.module->train();
  QuantOptions o;
  o.mode = "qat";
  auto q = wrap(m, o, TraceHints{{1, 8, 8}});
  at::manual_seed(9);
  const auto x = at::randn({16, 1, 8, 8});
  calibrate(q, [&](int64_t) { return x; }, 2);
  qat(q);
  const auto y = q.model.forward(x);
  y.pow(2).sum().backward();
  int with_grad = 0;
  for (const auto& p : m.module->parameters()) with_grad += p.grad().defined() && p.grad().abs().sum().item<double>() > 0;
  EXPECT_EQ(with_grad, static_cast<int>(m.module->parameters().size()));
  // Converting after QAT gives the same int8 model the fake-quantised forward simulated (eval).
  m.module->eval();
  at::NoGradGuard no_grad;
  const auto fq = q.model.forward(x);
  convert(q);
  const auto int8 = q.model.forward(x);
  const float step = q.plan->at(q.graph->nodes.size() - 1).act.scale;
  EXPECT_LE((fq - int8).abs().max().item<double>(), step * q.graph->nodes.back().weight.abs().max().item<double>() + 1e-4);
}

TEST(Graph, UnknownLayerIsNamed) {
  torch::nn::Sequential seq(nn::Linear(4, 4), torch::nn::Tanh());
  try {
    trace(*seq.ptr());
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("layer '1'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Tanh"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace xtrain::compress::graph_test
