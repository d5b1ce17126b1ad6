// compress_model end to end on a tiny MLP over a synthetic, learnable task (class = argmax of a
// fixed random projection of the input): pruning with fine-tuning keeps its masks and the target
// sparsity, the gradual schedule reaches its final sparsity, quantisation converts every Linear,
// distillation swaps in the student; and compress.json parsing names a mistyped key.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/compress/pipeline.h"
#include "xtrain/compress/prune/magnitude.h"
#include "xtrain/models/factory.h"

namespace xtrain::compress::pipeline_test {
namespace {

struct Task {
  at::Tensor proj = (at::manual_seed(5), at::randn({64, 4}));
  data::Batch batch(int64_t i) const {
    at::manual_seed(100 + i);
    data::Batch b;
    b.input = at::randn({32, 1, 8, 8});
    b.target = at::matmul(b.input.reshape({32, 64}), proj).argmax(1);
    return b;
  }
};

models::Model mlp(std::vector<int64_t> hidden = {48, 32}) {
  models::ModelOptions o;
  o.type = "mlp", o.in_features = 64, o.hidden = std::move(hidden), o.num_classes = 4;
  at::manual_seed(2);
  return models::build_model(o);
}

CompressHooks hooks(const Task& task) {
  CompressHooks h;
  h.train_batch = [&task](int64_t i) { return task.batch(i % 50); };
  h.calibration_input = [&task](int64_t i) { return task.batch(1000 + i).input; };
  h.loss = [](const at::Tensor& logits, const at::Tensor& y) { return at::cross_entropy_loss(logits, y); };
  h.evaluate = [&task](const models::Model& m) {
    at::NoGradGuard no_grad;
    const auto b = task.batch(2000);
    const auto logits = m.forward(b.input);
    return std::make_pair(at::cross_entropy_loss(logits, b.target).item<double>(),
                          logits.argmax(1).eq(b.target).to(at::kDouble).mean().item<double>());
  };
  h.latency_input = task.batch(0).input;
  h.default_lr = 1e-2;
  h.hints.sample_shape = {1, 8, 8};
  return h;
}

// Trains the dense model first so that compression has something to keep.
void pretrain(const models::Model& m, const CompressHooks& h) {
  fine_tune(m, 150, 1e-2, h, [&](const data::Batch& b) { return h.loss(m.forward(b.input), b.target); });
}

TEST(Pipeline, PruneFineTuneThenQuantise) {
  Task task;
  auto m = mlp();
  const auto h = hooks(task);
  pretrain(m, h);
  const auto o = parse_compress_options(R"({
    "pruning": {"method": "level", "config_list": [{"sparsity": 0.6, "op_types": ["Linear"]}],
                "finetune": {"steps": 30, "lr": 1e-3}},
    "quantization": {"mode": "static", "calibration_batches": 4},
    "evaluation": {"latency_repeats": 3}})", "test", nullptr);
  const auto r = compress_model(m, o, h);
  ASSERT_EQ(r.stats.size(), 3u);  // fp32, pruned, int8
  EXPECT_NEAR(r.stats[1].sparsity, 0.6, 0.01);  // masks held through fine-tuning
  EXPECT_NEAR(r.stats[2].sparsity, 0.6, 0.01);
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->stage(), QuantStage::kConverted);
  EXPECT_EQ(r.plan->num_enabled(), 3);
  EXPECT_LT(r.stats[2].bytes, r.stats[0].bytes * 0.3);  // int8 weights + per-channel scales + float bias
  // A learnable task the dense model solves well; compression must not destroy it.
  EXPECT_GT(r.stats[0].accuracy, 0.8);
  EXPECT_GT(r.stats[2].accuracy, r.stats[0].accuracy - 0.1);
  EXPECT_NE(r.summary.find("after/before"), std::string::npos);
}

TEST(Pipeline, GradualPruningReachesFinalSparsity) {
  Task task;
  auto m = mlp();
  auto h = hooks(task);
  const auto o = parse_compress_options(R"({
    "pruning": {"config_list": [{"sparsity": 0.8, "op_types": ["Linear"]}],
                "schedule": {"type": "agp", "start_step": 0, "end_step": 20, "frequency": 5},
                "finetune": {"steps": 30}}})", "test", nullptr);
  h.log = [&](const std::string&) {};
  const auto r = compress_model(m, o, h);
  ASSERT_EQ(r.stats.size(), 2u);
  EXPECT_NEAR(r.stats[1].sparsity, 0.8, 0.01);
  EXPECT_NEAR(weight_sparsity(*r.graph), 0.8, 0.01);
}

TEST(Pipeline, ChannelPruningShrinksAndDistillationSwapsTheModel) {
  Task task;
  auto m = mlp();
  auto h = hooks(task);
  pretrain(m, h);
  h.build_student = [] { return mlp({16}); };
  const auto o = parse_compress_options(R"({
    "distillation": {"temperature": 2.0, "alpha": 0.5, "train": {"steps": 40, "lr": 1e-2}},
    "pruning": {"method": "l1", "config_list": [{"sparsity": 0.5, "op_types": ["Linear"]}]}})", "test", nullptr);
  const auto r = compress_model(m, o, h);
  ASSERT_EQ(r.stats.size(), 3u);  // fp32, distilled, channel-pruned
  EXPECT_EQ(r.channels.pruned.size(), 1u);  // hidden.0 -> head (head itself is the output)
  EXPECT_EQ(r.channels.pruned[0].after, 8);
  EXPECT_LT(r.stats[2].parameters, r.stats[1].parameters);
  EXPECT_LT(r.stats[1].parameters, r.stats[0].parameters);
}

TEST(Pipeline, OptionsNameMistypedKeys) {
  try {
    parse_compress_options(R"({"quantization": {"mdoe": "static"}})", "compress.json", nullptr);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mode"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_compress_options("{}", "compress.json", nullptr), UsageError);
  EXPECT_THROW(parse_compress_options(R"({"pruning": {"method": "l3"}})", "compress.json", nullptr), UsageError);
}

}  // namespace
}  // namespace xtrain::compress::pipeline_test
