// Data parallelism end to end: N ranks over Gloo with micro-batch b train exactly like one rank
// with micro-batch N·b (its micro-batch m is the concatenation of every rank's micro-batch m).
// Reference: the same engine in this process, world 1. 20 AdamW steps with clipping, with and
// without gradient accumulation and overlapped (hook-driven) bucket reduction. SGD with momentum and
// no clipping: its update is proportional to the gradient, so a wrong averaging factor shows (Adam
// and clipping would normalise it away).
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdio>
#include <fstream>

#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"

namespace xtrain::data_parallel_test {
namespace {

constexpr int64_t kSteps = 20, kMicro = 3, kIn = 12, kClasses = 5;

std::string config_text(int64_t micro, int64_t gas, bool overlap) {
  return c10::str(R"({"train_micro_batch_size_per_gpu": )", micro, R"(, "gradient_accumulation_steps": )", gas,
                  R"(,
      "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01}},
      "zero_optimization": {"stage": 0, "reduce_bucket_size": 300, "overlap_comm": )",
                  overlap ? "true" : "false", "}}");
}

torch::nn::Sequential make_model() {
  torch::manual_seed(7);
  return torch::nn::Sequential(torch::nn::Linear(kIn, 32), torch::nn::GELU(), torch::nn::Linear(32, 32),
                               torch::nn::GELU(), torch::nn::Linear(32, kClasses));
}

// Every rank's samples of every step: inputs [steps, gas, world, micro, in], targets likewise.
struct Data {
  at::Tensor x, y;
};
Data make_data(int64_t gas, int64_t world) {
  torch::manual_seed(11);
  return {at::randn({kSteps, gas, world, kMicro, kIn}), at::randint(kClasses, {kSteps, gas, world, kMicro})};
}

// Trains kSteps; rank < 0 is the single-process reference that sees every rank's samples at once.
std::vector<at::Tensor> train(int64_t gas, int64_t world, bool overlap, int rank,
                              std::shared_ptr<comm::Communicator> dp, std::vector<double>* losses) {
  auto model = make_model();
  const bool reference = rank < 0;
  config::LoadOptions lo;
  lo.world_size = reference ? 1 : world;
  lo.quiet = true;
  const auto cfg = config::load_text(config_text(reference ? kMicro * world : kMicro, gas, overlap), lo).config;
  auto loss_fn = [model](const data::Batch& b) mutable { return at::cross_entropy_loss(model->forward(b.input), b.target); };
  Engine engine(model.ptr(), loss_fn, cfg, dp);
  const Data d = make_data(gas, world);
  for (int64_t k = 0; k < kSteps; ++k) {
    for (int64_t m = 0; m < gas; ++m) {
      data::Batch b;
      if (reference) {
        b = {d.x[k][m].reshape({world * kMicro, kIn}), d.y[k][m].reshape({world * kMicro})};
      } else {
        b = {d.x[k][m][rank], d.y[k][m][rank]};
      }
      engine.backward(engine.forward(b));
      EXPECT_EQ(engine.step(), m == gas - 1);
    }
    losses->push_back(engine.last_step().loss);
  }
  std::vector<at::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

void write_tensors(const std::string& path, const std::vector<at::Tensor>& ts, const std::vector<double>& losses) {
  std::ofstream f(path, std::ios::binary);
  for (const auto& t : ts) f.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  f.write(reinterpret_cast<const char*>(losses.data()), static_cast<std::streamsize>(losses.size() * sizeof(double)));
}

void read_tensors(const std::string& path, std::vector<at::Tensor>& ts, std::vector<double>& losses) {
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  for (auto& t : ts) f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  f.read(reinterpret_cast<char*>(losses.data()), static_cast<std::streamsize>(losses.size() * sizeof(double)));
  ASSERT_TRUE(f.good()) << path << " is shorter than expected";
}

TEST(DataParallelWorker, Train) {
  XTRAIN_WORKER_ONLY();
  const int64_t gas = std::stoll(testing::worker_env("DP_GAS"));
  const bool overlap = testing::worker_env("DP_OVERLAP") == "1";
  const auto info = comm::rank_info_from_env();
  comm::CommOptions co;
  co.timeout_seconds = 60;
  auto dp = comm::Communicator::create(info, co);
  std::vector<double> losses;
  const auto params = train(gas, info.world_size, overlap, info.rank, dp, &losses);
  // Every rank holds the same parameters; each writes them (rank 0's are compared, the others too).
  write_tensors(testing::worker_env("DP_OUT") + "." + std::to_string(info.rank), params, losses);
}

void check(int world, int64_t gas, bool overlap) {
  const std::string out = testing::binary_dir() + "/dp_test_" + std::to_string(world) + "_" + std::to_string(gas) +
                          (overlap ? "_overlap" : "");
  testing::WorkerOptions o;
  o.world_size = world;
  o.timeout_s = 120;
  o.env = {{"DP_GAS", std::to_string(gas)}, {"DP_OVERLAP", overlap ? "1" : "0"}, {"DP_OUT", out}};
  testing::expect_workers_ok(testing::run_workers("DataParallelWorker.Train", o));
  std::vector<double> ref_losses;
  const auto ref = train(gas, world, overlap, -1, nullptr, &ref_losses);
  for (int r = 0; r < world; ++r) {
    std::vector<at::Tensor> got;
    for (const auto& t : ref) got.push_back(at::empty_like(t));
    std::vector<double> losses(kSteps);
    read_tensors(out + "." + std::to_string(r), got, losses);
    std::remove((out + "." + std::to_string(r)).c_str());
    // fp32: the reference sums N·b per-sample gradients in one GEMM, the ranks sum b each and
    // all-reduce — the same terms in another order, ~1e-7 relative per step; parameters (|w| < 1)
    // after 20 steps agree to ~1e-6. 2e-5 absolute still fails on a wrong averaging factor (the
    // update scales by N) or a dropped bucket by orders of magnitude.
    for (size_t i = 0; i < ref.size(); ++i) {
      const double err = (got[i] - ref[i]).abs().max().item<double>();
      EXPECT_LT(err, 2e-5) << "rank " << r << " parameter " << i << " (world " << world << ", gas " << gas
                           << ", overlap " << overlap << ")";
    }
    for (int64_t k = 0; k < kSteps; ++k) {  // the logged loss is the mean over every rank's samples
      EXPECT_NEAR(losses[k], ref_losses[k], 1e-5 * std::max(1.0, std::abs(ref_losses[k]))) << "step " << k + 1;
    }
  }
}

TEST(DataParallel, TwoRanksMatchOneRankWithTheGlobalBatch) { check(2, 1, false); }
TEST(DataParallel, TwoRanksOverlappedWithAccumulation) { check(2, 2, true); }
TEST(DataParallel, FourRanksOverlapped) { check(4, 1, true); }
TEST(DataParallel, FourRanksWithAccumulation) { check(4, 3, false); }

}  // namespace
}  // namespace xtrain::data_parallel_test
