// A user's own torch::nn::Module and dataset trained with xtrain::Engine, outside the xtrain tree
// (built against the installed package: find_package(xtrain)). The task has a closed-form answer:
// y = x·w + b + noise, noise ~ N(0, sigma^2), so no model can do better than a mean squared error of
// sigma^2 = 0.01 and an untrained one sits near |w|^2 + b^2 (about 1.5). The program exits 0 when
// the held-out loss after training is below 1.5 sigma^2.
// Run as 2 data-parallel ranks: xtrain launch -N 2 --program ./custom_model -- ds_config.json
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <string>

#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"

namespace {

constexpr int64_t kFeatures = 8;
constexpr double kSigma = 0.1;

// The user's model: two linear maps (a factorised linear regression).
struct Regressor : torch::nn::Module {
  Regressor() : hidden(register_module("hidden", torch::nn::Linear(kFeatures, 16))),
                out(register_module("out", torch::nn::Linear(16, 1))) {}
  at::Tensor forward(const at::Tensor& x) { return out->forward(hidden->forward(x)); }
  torch::nn::Linear hidden, out;
};

// The user's dataset: batch i is drawn from its own seed, so every rank can make its own share.
struct Regression {
  at::Tensor w = at::arange(kFeatures, at::kFloat).div(kFeatures).sub(0.4).unsqueeze(1);  // [F, 1]
  double b = 0.3;
  xtrain::data::Batch batch(uint64_t index, int64_t size) const {
    at::Generator gen = at::detail::createCPUGenerator(1000003 * index + 17);
    at::Tensor x = at::randn({size, kFeatures}, gen);
    at::Tensor noise = at::randn({size, 1}, gen).mul(kSigma);
    return {x, x.matmul(w).add(b).add(noise)};
  }
};

double held_out_loss(Regressor& model, const Regression& data) {
  at::NoGradGuard no_grad;
  const auto b = data.batch(/*index=*/1u << 30, 4096);  // never a training batch
  return at::mse_loss(model.forward(b.input), b.target).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);  // two ranks share the machine
  const std::string config_path = argc > 1 ? argv[1] : "ds_config.json";
  const auto rank = xtrain::comm::rank_info_from_env();  // set by xtrain launch
  xtrain::config::LoadOptions lo;
  lo.world_size = rank.world_size;
  lo.quiet = rank.rank != 0;
  const auto cfg = xtrain::config::load(config_path, lo).config;
  auto dp = rank.world_size > 1 ? xtrain::comm::Communicator::create(rank, cfg.comm) : nullptr;

  at::manual_seed(cfg.trainer.seed);  // the initial weights (rank 0's are used everywhere)
  auto model = std::make_shared<Regressor>();
  Regression data;
  auto loss_fn = [model](const xtrain::data::Batch& b) { return at::mse_loss(model->forward(b.input), b.target); };
  xtrain::Engine engine(model, loss_fn, cfg, dp);

  const double first = held_out_loss(*model, data);
  const int64_t micro = cfg.engine.train_micro_batch_size_per_gpu.value_or(32);
  for (int64_t step = 0; step < cfg.trainer.steps; ++step) {
    const auto batch = data.batch(step * rank.world_size + rank.rank, micro);  // this rank's share
    engine.backward(engine.forward(batch));
    engine.step();
    if (rank.rank == 0 && (step + 1) % 20 == 0) {
      std::printf("step %3lld  train loss %.4f  lr %.4f\n", static_cast<long long>(step + 1),
                  engine.last_step().loss, engine.last_step().lr);
    }
  }
  const double last = held_out_loss(*model, data);
  const double threshold = 1.5 * kSigma * kSigma;
  if (rank.rank == 0) {
    std::printf("held-out loss %.4f -> %.4f (noise floor %.4f, pass below %.4f)\n", first, last,
                kSigma * kSigma, threshold);
  }
  return last < threshold && last < first ? 0 : 1;
}
