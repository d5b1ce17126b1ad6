// nn::checkpoint against the plain graph (the reference it must reproduce): a stack of dropout
// blocks gives bit-identical outputs and gradients and leaves the RNG where the plain run leaves
// it; the function reruns exactly once in backward; gradients also come through
// torch::autograd::grad; the saved input is checked for in-place changes; and a forward keeps
// far fewer bytes alive (memory pool's bytes in use).
#include <ATen/Functions.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/container/modulelist.h>

#include <functional>
#include <iostream>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/base/memory_pool.h"
#include "xtrain/nn/block.h"
#include "xtrain/nn/checkpoint.h"
#include "xtrain/nn/mlp.h"

namespace xtrain::nn::checkpoint_test {
namespace {

using xtrain::testing::expect_equal;

constexpr int64_t kB = 2, kT = 12, kC = 32, kNH = 4;

struct Stack {
  torch::nn::ModuleList blocks;
  explicit Stack(int64_t n, double dropout) {
    torch::manual_seed(3);
    for (int64_t i = 0; i < n; ++i) blocks->push_back(Block(kC, kNH, 16, dropout));
  }
  BlockImpl& block(size_t i) { return *blocks[i]->as<BlockImpl>(); }
  // checkpointed[i]: run block i through nn::checkpoint.
  at::Tensor forward(at::Tensor x, const std::vector<bool>& checkpointed) {
    for (size_t i = 0; i < blocks->size(); ++i) {
      BlockImpl& b = block(i);
      x = checkpointed[i] ? checkpoint_module(b, [&b](const at::Tensor& in) { return b.forward(in); }, x)
                          : b.forward(x);
    }
    return x;
  }
  void zero_grad() {
    for (auto& p : blocks->parameters()) p.mutable_grad() = at::Tensor();
  }
};

struct Outcome {
  at::Tensor y, dx, after;  // output, input gradient, first random draw after backward
  std::vector<at::Tensor> grads;
};

Outcome run(Stack& s, const std::vector<bool>& checkpointed) {
  s.zero_grad();
  torch::manual_seed(11);
  const auto x = at::randn({kB, kT, kC}).requires_grad_();
  const auto g = at::randn({kB, kT, kC});
  Outcome r;
  r.y = s.forward(x, checkpointed);
  (r.y * g).sum().backward();
  r.dx = x.grad();
  r.after = at::rand({4});
  for (auto& p : s.blocks->parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

void expect_same_run(const Outcome& a, const Outcome& b, const std::string& what) {
  expect_equal(a.y, b.y, what + ": output");
  expect_equal(a.dx, b.dx, what + ": input gradient");
  expect_equal(a.after, b.after, what + ": RNG after backward");
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) expect_equal(a.grads[i], b.grads[i], what + ": parameter " + std::to_string(i));
}

TEST(Checkpoint, DropoutBlocksGiveBitIdenticalGradientsAndRngState) {
  Stack s(3, /*dropout=*/0.2);
  const Outcome plain = run(s, {false, false, false});
  expect_same_run(run(s, {true, true, true}), plain, "all checkpointed");
  expect_same_run(run(s, {true, false, true}), plain, "blocks 0 and 2 checkpointed");
  // The masks matter: a different seed gives a different output (the test would catch a mask
  // drawn afresh in backward only through the gradients above).
  torch::manual_seed(12);
  EXPECT_FALSE(s.forward(at::randn({kB, kT, kC}), {false, false, false}).equal(plain.y));
}

TEST(Checkpoint, RerunsTheFunctionOnceInBackward) {
  Stack s(1, 0.1);
  int calls = 0;
  BlockImpl& b = s.block(0);
  const auto x = at::randn({kB, kT, kC}).requires_grad_();
  const auto y = checkpoint_module(b, [&](const at::Tensor& in) { ++calls; return b.forward(in); }, x);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_EQ(calls, 2);
}

TEST(Checkpoint, ParameterGradientsFlowThroughTheOuterGraph) {
  // torch::autograd::grad does not accumulate into .grad: the parameters must be inputs of the
  // checkpoint node for their gradients to come back at all.
  Stack s(1, 0.0);
  BlockImpl& b = s.block(0);
  const auto params = b.parameters();
  torch::manual_seed(5);
  const auto x = at::randn({kB, kT, kC});
  const auto plain = torch::autograd::grad({b.forward(x).pow(2).sum()}, params);
  const auto ckpt = torch::autograd::grad(
      {checkpoint_module(b, [&b](const at::Tensor& in) { return b.forward(in); }, x).pow(2).sum()}, params);
  ASSERT_EQ(plain.size(), ckpt.size());
  for (size_t i = 0; i < plain.size(); ++i) expect_equal(ckpt[i], plain[i], "parameter " + std::to_string(i));
  for (auto& p : params) EXPECT_FALSE(p.grad().defined());
}

TEST(Checkpoint, CpuCheckpointingGivesTheSameGradients) {
  // On CPU tensors the offload is a no-op; the flag must not change the result.
  Stack s(2, 0.2);
  const Outcome plain = run(s, {false, false});
  s.zero_grad();
  torch::manual_seed(11);
  const auto x = at::randn({kB, kT, kC}).requires_grad_();
  const auto g = at::randn({kB, kT, kC});
  CheckpointOptions cpu;
  cpu.cpu_checkpointing = true;
  at::Tensor y = x;
  for (size_t i = 0; i < 2; ++i) {
    BlockImpl& b = s.block(i);
    y = checkpoint_module(b, [&b](const at::Tensor& in) { return b.forward(in); }, y, cpu);
  }
  (y * g).sum().backward();
  expect_equal(y, plain.y, "output");
  expect_equal(x.grad(), plain.dx, "input gradient");
}

TEST(Checkpoint, InPlaceChangeOfTheSavedInputIsAnError) {
  Stack s(1, 0.0);
  BlockImpl& b = s.block(0);
  const auto leaf = at::randn({kB, kT, kC}).requires_grad_();
  auto x = leaf * 1.0;
  const auto y = checkpoint_module(b, [&b](const at::Tensor& in) { return b.forward(in); }, x);
  x.add_(1.0);
  EXPECT_THROW(y.sum().backward(), c10::Error);
}

// fn under CPU bf16 autocast, entered and left as precision::AutocastGuard does (also on a throw).
at::Tensor under_autocast(const std::function<at::Tensor()>& fn) {
  struct Scope {
    Scope() {
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::increment_nesting();
    }
    ~Scope() {
      if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
      at::autocast::set_cpu_enabled(false);
    }
  } scope;
  return fn();
}

TEST(Checkpoint, AutocastRecomputeMatchesAndLeavesNoStaleWeightCasts) {
  torch::manual_seed(4);
  Mlp mlp(kC, /*dropout=*/0.2);  // nn::Linear casts its weights through autocast's cache
  const auto params = mlp->parameters();
  const auto x0 = at::randn({kB, kT, kC});
  const auto g = at::randn({kB, kT, kC});
  auto forward = [&mlp](const at::Tensor& in) { return mlp->forward(in); };
  std::vector<std::vector<at::Tensor>> grads;
  for (bool ckpt : {false, true}) {
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    const auto x = x0.clone().requires_grad_();
    torch::manual_seed(9);
    const auto y = under_autocast([&] { return ckpt ? checkpoint_module(*mlp, forward, x) : forward(x); });
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    (y.to(at::kFloat) * g).sum().backward();  // backward outside autocast, as the engine runs it
    EXPECT_FALSE(at::autocast::is_cpu_enabled()) << "the recomputation left autocast on";
    grads.push_back({y.detach(), x.grad()});
    for (auto& p : params) grads.back().push_back(p.grad().clone());
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    expect_equal(grads[1][i], grads[0][i], "bf16 output/gradient " + std::to_string(i));
  }
  // An optimizer step changes the weights in place; the next autocast forward must cast them
  // afresh, not reuse bf16 copies cached during the recomputation.
  mlp->eval();
  {
    at::NoGradGuard no_grad;
    for (auto& p : params) p.mul_(0.5);
  }
  const auto next = under_autocast([&] { return forward(x0); });
  at::autocast::clear_cache();
  const auto fresh = under_autocast([&] { return forward(x0); });
  expect_equal(next, fresh, "forward after the step");
}

int64_t bytes_alive_after_forward(Stack& s, bool checkpointed) {
  torch::manual_seed(11);
  const auto x = at::randn({4, 16, kC}).requires_grad_();
  const int64_t before = memory_pool::stats().bytes_in_use;
  auto y = s.forward(x, std::vector<bool>(s.blocks->size(), checkpointed));
  const int64_t alive = memory_pool::stats().bytes_in_use - before;
  y.sum().backward();
  return alive;
}

TEST(Checkpoint, ForwardKeepsOnlyTheBlockInputsAlive) {
  memory_pool::install({});
  Stack s(4, 0.1);
  for (auto& p : s.blocks->parameters()) p.mutable_grad() = at::zeros_like(p);  // not counted below
  const int64_t plain = bytes_alive_after_forward(s, false);
  const int64_t ckpt = bytes_alive_after_forward(s, true);
  base::MemoryPoolOptions off;
  off.enabled = false;
  memory_pool::install(off);
  // Checkpointed: each block keeps its output [4, 16, C] fp32 (8 KiB; the next block's saved input,
  // or y) and the CPU generator state (5 KiB). Plain: every block also keeps the LayerNorm
  // outputs, qkv [.., 3C], scores, softmax and dropout masks [B·NH, T, T], the MLP's [.., 4C], ...
  const int64_t activation = 4 * 16 * kC * 4;
  std::cout << "bytes alive after forward: plain " << plain << ", checkpointed " << ckpt << "\n";
  EXPECT_LE(ckpt, 4 * 2 * memory_pool::size_class_bytes(activation));
  EXPECT_GT(plain, 10 * ckpt);
}

TEST(Checkpoint, NumberCheckpointsSelectsTheFirstBlocks) {
  ActivationCheckpointingOptions o;
  EXPECT_FALSE(is_checkpointed(0, 4, o));  // disabled
  o.enabled = true;
  for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(is_checkpointed(i, 4, o)) << i;  // null: all
  o.number_checkpoints = 2;
  const std::vector<bool> want = {true, true, false, false};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(is_checkpointed(i, 4, o), want[i]) << i;
  o.number_checkpoints = 9;
  for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(is_checkpointed(i, 4, o)) << i;
  o.number_checkpoints = 0;
  EXPECT_THROW(is_checkpointed(0, 4, o), UsageError);
  ActivationCheckpointingOptions p;
  p.profile = true;
  EXPECT_THROW(checkpoint_options(p), UsageError);
  p.profile = false;
  p.cpu_checkpointing = true;
  p.partition_activations = true;
  EXPECT_TRUE(checkpoint_options(p).cpu_checkpointing);
}

}  // namespace
}  // namespace xtrain::nn::checkpoint_test
