// The compressed-model files (what `xtrain compress` writes and `xtrain export` reads): model.pt
// restores every tensor bit for bit, into a freshly built model even when structured pruning
// changed shapes; quant.json restores the int8 plan so the reloaded model's int8 forward equals
// the original's exactly; torch.load (python3-torch) reads model.pt.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/compress/artifact.h"
#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/prune/channel_prune.h"
#include "xtrain/compress/quant/quantize.h"
#include "xtrain/models/factory.h"

namespace xtrain::compress::artifact_test {
namespace {

using xtrain::testing::expect_equal;

models::ModelOptions mlp_options() {
  models::ModelOptions o;
  o.type = "mlp", o.in_features = 64, o.hidden = {32, 24}, o.num_classes = 10;
  return o;
}

TEST(Artifact, PrunedAndQuantisedModelRoundTrips) {
  at::NoGradGuard no_grad;
  at::manual_seed(1);
  auto m = models::build_model(mlp_options());
  m.module->eval();
  const auto g = trace(*m.module);
  PruneRule r;
  r.sparsity = 0.5, r.op_types = {"Linear"};
  prune_channels(*m.module, g, resolve_targets(g, {r}), 2);
  auto q = wrap(m, {}, {{1, 8, 8}});
  const auto x = at::randn({16, 1, 8, 8});
  calibrate(q, [&](int64_t) { return x; }, 1);
  convert(q);
  const auto expected = q.model.forward(x);

  const auto dir = xtrain::testing::temp_dir("artifact");
  save_state(*m.module, dir + "/model.pt");
  const auto json = quant_plan_json(*q.graph, *q.plan);

  at::manual_seed(2);  // different initial weights and the unpruned shapes
  auto fresh = models::build_model(mlp_options());
  load_state(*fresh.module, dir + "/model.pt");
  fresh.module->eval();
  const auto a = m.module->named_parameters();
  for (const auto& p : fresh.module->named_parameters()) expect_equal(p.value(), a[p.key()], p.key());
  EXPECT_EQ(fresh.module->named_parameters()["hidden.0.weight"].size(0), 16);

  const auto fg = std::make_shared<Graph>(trace(*fresh.module));
  QuantPlan plan(*fg, quant_options_from_json(json));
  restore_quant_plan(*fg, plan, json);
  expect_equal(run_graph(*fg, x, &plan), expected, "int8 forward after reload");
}

TEST(Artifact, TorchLoadReadsModelPt) {
  at::manual_seed(3);
  auto m = models::build_model(mlp_options());
  const auto dir = xtrain::testing::temp_dir("artifact_py");
  save_state(*m.module, dir + "/model.pt");
  std::string out;
  const int rc = xtrain::testing::run_command(
      "/usr/bin/python3 -c \"import torch; d = torch.load('" + dir +
          "/model.pt'); print(sorted(d)[0], tuple(d['hidden.0.weight'].shape), float(d['head.bias'].sum()))\"",
      &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("head.bias (32, 64) " ), std::string::npos) << out;
  const double bias_sum = m.module->named_parameters()["head.bias"].sum().item<double>();
  EXPECT_NEAR(std::stod(out.substr(out.rfind(' ') + 1)), bias_sum, 1e-6) << out;
}

}  // namespace
}  // namespace xtrain::compress::artifact_test
