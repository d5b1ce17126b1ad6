// Activation checkpointing on the GPT against the same GPT without it (same weights, same seed,
// dropout on): loss, logits and every gradient bit-identical over two steps, with all blocks and
// with number_checkpoints = 2; the checkpointed graph has one node per block where the plain one
// has dozens; eval/no-grad forwards are untouched; and a non-GPT module is refused.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <iostream>
#include <unordered_set>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_checkpointing.h"
#include "xtrain/models/gpt_pipeline.h"
#include "xtrain/models/gpt_tensor_parallel.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/models/mlp_classifier.h"

namespace xtrain::models::gpt_checkpointing_test {
namespace {

using xtrain::testing::expect_equal;

ModelOptions small_gpt() {
  ModelOptions o;
  o.layers = 4;
  o.d_model = 32;
  o.heads = 4;
  o.seq_len = 16;
  o.vocab = 64;
  o.dropout = 0.1;
  return o;
}

GPT make_gpt(const nn::ActivationCheckpointingOptions& ac) {
  torch::manual_seed(1);
  GPT gpt(small_gpt());
  apply_activation_checkpointing(*gpt, ac);
  return gpt;
}

at::Tensor lm_loss(GPT& gpt, const at::Tensor& data) {
  const auto logits = gpt->forward(data.narrow(1, 0, 16));
  return at::cross_entropy_loss(logits.reshape({-1, 64}), data.narrow(1, 1, 16).reshape({-1}));
}

// Two SGD steps; returns every step's loss and gradients and the final parameters.
std::vector<at::Tensor> train(GPT& gpt) {
  torch::manual_seed(42);
  const auto data = at::randint(0, 64, {3, 17});
  std::vector<at::Tensor> out;
  for (int step = 0; step < 2; ++step) {
    for (auto& p : gpt->parameters()) p.mutable_grad() = at::Tensor();
    const auto loss = lm_loss(gpt, data);
    loss.backward();
    out.push_back(loss.detach());
    at::NoGradGuard no_grad;
    for (auto& p : gpt->parameters()) {
      out.push_back(p.grad().clone());
      p.sub_(p.grad(), 0.5);
    }
  }
  for (auto& p : gpt->parameters()) out.push_back(p.detach().clone());
  return out;
}

nn::ActivationCheckpointingOptions enabled(int64_t number_checkpoints = -1) {
  nn::ActivationCheckpointingOptions ac;
  ac.enabled = true;
  ac.number_checkpoints = number_checkpoints;
  return ac;
}

TEST(GptCheckpointing, GradientsBitIdenticalToThePlainGptWithDropout) {
  auto plain_gpt = make_gpt({});
  const auto plain = train(plain_gpt);
  for (int64_t n : {-1, 2}) {
    auto gpt = make_gpt(enabled(n));
    const auto ckpt = train(gpt);
    ASSERT_EQ(ckpt.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      expect_equal(ckpt[i], plain[i], "number_checkpoints " + std::to_string(n) + ", tensor " + std::to_string(i));
    }
  }
}

// Autograd nodes reachable from the loss: each holds what its backward saved.
int64_t graph_nodes(const at::Tensor& loss) {
  std::unordered_set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> stack{loss.grad_fn().get()};
  while (!stack.empty()) {
    auto* node = stack.back();
    stack.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    for (const auto& edge : node->next_edges()) stack.push_back(edge.function.get());
  }
  return static_cast<int64_t>(seen.size());
}

TEST(GptCheckpointing, EachCheckpointedBlockIsOneGraphNode) {
  torch::manual_seed(42);
  const auto data = at::randint(0, 64, {3, 17});
  auto plain_gpt = make_gpt({});
  auto all = make_gpt(enabled());
  auto two = make_gpt(enabled(2));
  const int64_t plain = graph_nodes(lm_loss(plain_gpt, data));
  const int64_t ckpt_all = graph_nodes(lm_loss(all, data));
  const int64_t ckpt_two = graph_nodes(lm_loss(two, data));
  std::cout << "autograd nodes: plain " << plain << ", 2 of 4 blocks checkpointed " << ckpt_two << ", all "
            << ckpt_all << "\n";
  // A plain block is the same number of nodes k each time; checkpointed it is 1 node (plus one
  // AccumulateGrad per parameter, 12 per block, which exist in both graphs).
  const int64_t k = (plain - ckpt_all) / 4 + 1;
  EXPECT_EQ((plain - ckpt_all) % 4, 0);
  EXPECT_EQ(ckpt_two, ckpt_all + 2 * (k - 1));
  EXPECT_GT(k, 10);
}

TEST(GptCheckpointing, NoGradForwardIsUnchanged) {
  auto plain_gpt = make_gpt({});
  auto gpt = make_gpt(enabled());
  plain_gpt->eval();
  gpt->eval();
  const auto idx = at::randint(0, 64, {2, 16});
  at::NoGradGuard no_grad;
  expect_equal(gpt->forward(idx), plain_gpt->forward(idx), "eval logits");
}

// A tensor-parallel GPT (a group of one) and a pipeline stage (all blocks, no dropout: the parallel
// layers refuse it) checkpoint their blocks through nn::UnitRouted: fewer graph nodes, the same
// loss and gradients bit for bit.
TEST(GptCheckpointing, TensorParallelGptAndPipelineStageCheckpointTheirBlocks) {
  ModelOptions o = small_gpt();
  o.dropout = 0.0;
  const auto data = at::randint(0, 64, {3, 17});
  const auto input = data.narrow(1, 0, 16), target = data.narrow(1, 1, 16);
  auto run = [&](bool tensor_parallel, bool checkpointed) {
    torch::manual_seed(1);
    std::shared_ptr<torch::nn::Module> whole;
    if (tensor_parallel) {
      whole = TensorParallelGPT(o, comm::Communicator::single()).ptr();
    } else {
      whole = GPT(o).ptr();
    }
    auto stage = PipelineGPT(whole, 0, 1, "uniform");
    torch::nn::Module& model = tensor_parallel ? *whole : static_cast<torch::nn::Module&>(*stage);
    if (checkpointed) apply_activation_checkpointing(model, enabled());
    at::Tensor loss;
    if (tensor_parallel) {
      auto* gpt = dynamic_cast<TensorParallelGPTImpl*>(whole.get());
      loss = gpt->loss(gpt->forward(input), target);
    } else {
      loss = stage->loss(stage->forward(input), target);
    }
    const int64_t nodes = graph_nodes(loss);
    loss.backward();
    std::vector<at::Tensor> grads = {loss.detach()};
    for (const auto& p : model.parameters()) grads.push_back(p.grad().clone());
    return std::make_pair(nodes, grads);
  };
  for (bool tp : {true, false}) {
    const auto plain = run(tp, false), ckpt = run(tp, true);
    EXPECT_LE(ckpt.first + 4 * 5, plain.first) << (tp ? "tensor-parallel" : "pipeline stage");
    ASSERT_EQ(ckpt.second.size(), plain.second.size());
    for (size_t i = 0; i < plain.second.size(); ++i) {
      expect_equal(ckpt.second[i], plain.second[i], (tp ? "tensor-parallel " : "pipeline stage ") + std::to_string(i));
    }
  }
}

TEST(GptCheckpointing, OnlyGptBlocksCanBeCheckpointed) {
  MlpClassifier mlp(4, std::vector<int64_t>{8}, 2, 0.0);
  EXPECT_THROW(apply_activation_checkpointing(*mlp, enabled()), UsageError);
  apply_activation_checkpointing(*mlp, {});  // disabled: nothing to do, no error
}

}  // namespace
}  // namespace xtrain::models::gpt_checkpointing_test
