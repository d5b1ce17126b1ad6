// pipeline.activation_checkpoint_interval (DeepSpeed's PipelineModule argument) from a config file to
// a pipeline stage: the stage's blocks run in groups of N under activation checkpointing. Against
// the same stage with interval 0 (same weights, same seed, dropout on): loss and every gradient
// equal, each block's forward runs twice (once more in the recompute) instead of once, and the
// graph keeps one node per group instead of every block's activations.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <map>
#include <unordered_set>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_checkpointing.h"
#include "xtrain/models/gpt_pipeline.h"

namespace xtrain::models::pipeline_checkpoint_interval_test {
namespace {

constexpr int64_t kVocab = 64, kSeq = 16;

config::Config load(const std::string& pipeline_json, bool checkpointing_enabled = false) {
  config::LoadOptions lo;
  lo.quiet = true;
  const std::string text = "{\"train_micro_batch_size_per_gpu\": 1, \"pipeline\": " + pipeline_json +
                           ", \"activation_checkpointing\": {\"enabled\": " +
                           (checkpointing_enabled ? "true" : "false") + "}}";
  return config::load_text(text, lo).config;
}

ModelOptions small_gpt() {
  ModelOptions o;
  o.layers = 5;
  o.d_model = 32;
  o.heads = 4;
  o.seq_len = kSeq;
  o.vocab = kVocab;
  o.dropout = 0.1;  // the recompute must replay the forward's dropout masks
  return o;
}

struct Outcome {
  at::Tensor loss;
  std::vector<at::Tensor> grads;
  std::map<int64_t, int> block_calls;  // forward calls per block, forward and backward together
  int64_t graph_nodes = 0;
};

int64_t graph_nodes(const at::Tensor& t) {
  std::unordered_set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo = {t.grad_fn().get()};
  while (!todo.empty()) {
    auto* n = todo.back();
    todo.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return static_cast<int64_t>(seen.size());
}

// One forward and backward of a one-stage pipeline built from `cfg`, the way the trainer builds it.
Outcome run(const config::Config& cfg) {
  torch::manual_seed(1);
  auto stage = PipelineGPT(GPT(small_gpt()).ptr(), 0, 1, "uniform");
  apply_pipeline_checkpoint_interval(*stage, cfg.pipeline.activation_checkpoint_interval, cfg.activation_checkpointing);
  Outcome r;
  stage->wrap_units([&r](int64_t i, torch::nn::Module&, const nn::UnitRouted::UnitFn& inner, const at::Tensor& x) {
    ++r.block_calls[i];
    return inner(x);
  });
  torch::manual_seed(42);
  const auto data = at::randint(0, kVocab, {3, kSeq + 1});
  r.loss = stage->loss(stage->forward(data.narrow(1, 0, kSeq)), data.narrow(1, 1, kSeq));
  r.graph_nodes = graph_nodes(r.loss);
  r.loss.backward();
  for (const auto& p : stage->parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

void expect_same_gradients(const Outcome& got, const Outcome& want, const std::string& what) {
  // The recompute runs the same ops on the same inputs under the same RNG state: equal up to fp32
  // reassociation (in practice bit for bit); 1e-6 relative still catches a missed dropout replay.
  EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(), 1e-6) << what;
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    const double scale = std::max(1e-3, want.grads[i].abs().max().item<double>());
    const auto diff = (got.grads[i] - want.grads[i]).abs();
    EXPECT_LE(diff.max().item<double>(), 1e-6 * scale)
        << what << ": parameter " << i << ", largest error at flat index " << diff.argmax().item<int64_t>();
  }
}

TEST(PipelineCheckpointInterval, GroupsOfBlocksRecomputeWithTheSameGradients) {
  const Outcome plain = run(load(R"({"activation_checkpoint_interval": 0})"));
  for (const auto& [b, calls] : plain.block_calls) EXPECT_EQ(calls, 1) << "interval 0, block " << b;
  for (int64_t interval : {1, 2, 5}) {
    const Outcome ckpt = run(load(c10::str(R"({"activation_checkpoint_interval": )", interval, "}")));
    const std::string what = c10::str("interval ", interval);
    expect_same_gradients(ckpt, plain, what);
    ASSERT_EQ(ckpt.block_calls.size(), 5u) << what;
    for (const auto& [b, calls] : ckpt.block_calls) EXPECT_EQ(calls, 2) << what << ", block " << b;
    // Each block's graph (dozens of nodes holding its activations) becomes part of one node per
    // group: at least 10 nodes fewer per block that is now inside a checkpoint.
    EXPECT_LE(ckpt.graph_nodes + 10 * 5, plain.graph_nodes) << what;
  }
}

TEST(PipelineCheckpointInterval, BadValuesAndTheDoubleRecomputeAreRefused) {
  EXPECT_THROW(run(load(R"({"activation_checkpoint_interval": -1})")), UsageError);
  try {
    run(load(R"({"activation_checkpoint_interval": 2})", /*checkpointing_enabled=*/true));
    ADD_FAILURE() << "interval with activation_checkpointing.enabled was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.activation_checkpoint_interval"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::models::pipeline_checkpoint_interval_test
