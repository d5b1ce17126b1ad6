// PipelineExecutor against the single-process model: an MLP of 8 Linear(16,16)+GELU layers split
// into 2 and 4 stages over Gloo (one rank per stage, partition_method "parameters"), m = 4
// micro-batches of 4 rows, MSE loss; after each of 3 SGD steps the last stage's loss and, after
// them, every stage's parameter changes equal the model trained on the full 16-row batch in one process,
// for both GPipe and 1F1B.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include "support/fixtures.h"
#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/pipeline/partition.h"
#include "xtrain/parallel/pipeline/pipeline_executor.h"

namespace xtrain::parallel::pipeline::pipeline_executor_test {
namespace {

using xtrain::testing::expect_close;

constexpr int kLayers = 8, kWidth = 16, kBatch = 16, kMicro = 4, kSteps = 3;
constexpr double kLr = 0.5;

// The layer list: Linear, GELU, Linear, GELU, ... (2 * kLayers items; GELU has no parameters).
struct Mlp {
  std::vector<torch::nn::Linear> linears;
  Mlp() {
    torch::manual_seed(11);
    for (int i = 0; i < kLayers; ++i) linears.emplace_back(kWidth, kWidth);
  }
  std::vector<int64_t> item_weights() const {
    std::vector<int64_t> w;
    for (int i = 0; i < kLayers; ++i) w.insert(w.end(), {kWidth * kWidth + kWidth, 0});
    return w;
  }
  at::Tensor forward(at::Tensor x, int begin, int end) {  // items [begin, end)
    for (int k = begin; k < end; ++k) x = k % 2 == 0 ? linears[k / 2]->forward(x) : at::gelu(x);
    return x;
  }
  void sgd(int begin, int end) {
    torch::NoGradGuard no_grad;
    for (int k = begin; k < end; k += 1) {
      if (k % 2 != 0) continue;
      for (auto& p : linears[k / 2]->parameters()) {
        p.sub_(p.grad() * kLr);
        p.mutable_grad().zero_();
      }
    }
  }
};

std::pair<at::Tensor, at::Tensor> batch() {
  torch::manual_seed(12);
  auto x = at::randn({kBatch, kWidth});
  auto y = at::randn({kBatch, kWidth});
  return {x, y};
}

at::Tensor mse(const at::Tensor& out, const at::Tensor& target) { return (out - target).pow(2).mean(); }

void run_stage(ScheduleKind kind, const std::shared_ptr<comm::Communicator>& c) {
  const int p = c->size(), s = c->rank();
  Mlp init, ref, model;  // same seed: identical initial weights
  const auto [x, y] = batch();
  const auto bounds = partition_layers(model.item_weights(), p, "parameters");
  ASSERT_EQ(bounds[p], 2 * kLayers);
  const int begin = bounds[s], end = bounds[s + 1];
  PipelineExecutor exec([&](const at::Tensor& in) { return model.forward(in, begin, end); }, c, mse,
                        [&] { model.sgd(begin, end); });
  const auto xs = x.chunk(kMicro), ys = y.chunk(kMicro);
  for (int step = 0; step < kSteps; ++step) {
    const auto loss = exec.run(make_schedule(kind, p, kMicro, s), xs, ys);
    auto ref_loss = mse(ref.forward(x, 0, 2 * kLayers), y);
    ref_loss.backward();
    ref.sgd(0, 2 * kLayers);
    if (s == p - 1) {
      // Mean of 4 micro-batch means vs one mean over 16 rows: fp32 summation order.
      expect_close(loss, ref_loss.detach(), 1e-5, 1e-7, "loss at step " + std::to_string(step));
    } else {
      EXPECT_FALSE(loss.defined());
    }
    const int want_in_flight = kind == ScheduleKind::kGPipe ? kMicro : std::min(p - s, kMicro);
    EXPECT_EQ(exec.stats().max_in_flight, want_in_flight);
  }
  // Compared: each weight's change over the 3 steps (the weights themselves move by only ~1e-4 of
  // their size). Gradients summed over 4 micro-batches instead of one GEMM over 16 rows: fp32
  // rounding, plus a few ulps of |w| ~ 0.25 (~1e-7) from the updates themselves.
  for (int k = begin; k < end; k += 2) {
    const auto& got = model.linears[k / 2];
    const auto& want = ref.linears[k / 2];
    const auto& w0 = init.linears[k / 2];
    const std::string what = "stage " + std::to_string(s) + " linear " + std::to_string(k / 2);
    expect_close(got->weight - w0->weight, want->weight - w0->weight, 1e-3, 2e-7, what + " weight change");
    expect_close(got->bias - w0->bias, want->bias - w0->bias, 1e-3, 2e-7, what + " bias change");
  }
}

TEST(PipelineExecutorWorker, MatchesSingleProcess) {
  XTRAIN_WORKER_ONLY();
  comm::CommOptions o;
  o.timeout_seconds = 30;
  auto c = comm::Communicator::create(comm::rank_info_from_env(), o);
  run_stage(ScheduleKind::kGPipe, c);
  run_stage(ScheduleKind::kOneFOneB, c);
  c->barrier();
}

TEST(PipelineExecutor, TwoStagesMatchSingleProcess) {
  testing::expect_workers_ok("PipelineExecutorWorker.MatchesSingleProcess", 2);
}

TEST(PipelineExecutor, FourStagesMatchSingleProcess) {
  testing::expect_workers_ok("PipelineExecutorWorker.MatchesSingleProcess", 4);
}

TEST(PipelineExecutor, SingleStageIsGradientAccumulation) {
  Mlp ref, model;
  const auto [x, y] = batch();
  PipelineExecutor exec([&](const at::Tensor& in) { return model.forward(in, 0, 2 * kLayers); }, nullptr, mse);
  const auto loss = exec.run(one_f_one_b_schedule(1, kMicro, 0), x.chunk(kMicro), y.chunk(kMicro));
  auto ref_loss = mse(ref.forward(x, 0, 2 * kLayers), y);
  ref_loss.backward();
  expect_close(loss, ref_loss.detach(), 1e-5, 1e-7, "loss");  // summation order only
  for (int i = 0; i < kLayers; ++i)
    expect_close(model.linears[i]->weight.grad(), ref.linears[i]->weight.grad(), 1e-5, 1e-6, "grad " + std::to_string(i));
}

}  // namespace
}  // namespace xtrain::parallel::pipeline::pipeline_executor_test
