// xtrain.local_sgd: ranks step locally and synchronise parameters every H steps (local SGD) or take
// DiLoCo's outer Nesterov step. References: plain data parallelism (H = 1 "average" with plain SGD
// is the same update, mean(θ - lr·g_r) = θ - lr·mean(g_r)); "average" itself for nesterov with lr 1
// and momentum 0 (anchor - (anchor - mean) = mean); LibTorch's torch::optim::SGD(nesterov) for the
// outer step; the communicator's closed-form byte counts; an uninterrupted run for resuming.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <memory>

#include "support/errors.h"
#include "support/fixtures.h"
#include "support/mlp_loss.h"
#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/parallel/data/local_sgd.h"

namespace xtrain::local_sgd_test {
namespace {

constexpr int64_t kIn = 6, kHidden = 16, kOut = 3, kMicro = 4;

testing::MlpLoss make_mlp() {
  return testing::make_mlp_loss(
      {{"fc1.weight", {kHidden, kIn}}, {"fc1.bias", {kHidden}}, {"fc2.weight", {kOut, kHidden}}, {"fc2.bias", {kOut}}});
}

// local_sgd: "" (off) or the xtrain.local_sgd object.
config::Config make_config(int64_t world, double inner_momentum, const std::string& local_sgd) {
  const std::string text = c10::str(
      R"({"train_micro_batch_size_per_gpu": )", kMicro, R"(, "gradient_accumulation_steps": 1,
      "optimizer": {"type": "SGD", "params": {"lr": 0.2, "momentum": )", inner_momentum, R"(, "weight_decay": 0}},
      "zero_optimization": {"stage": 0, "reduce_bucket_size": 100})",
      local_sgd.empty() ? "" : R"(, "xtrain": {"local_sgd": )" + local_sgd + "}", "}");
  config::LoadOptions lo;
  lo.world_size = world;
  lo.quiet = true;
  return config::load_text(text, lo).config;
}

std::string local_sgd(int64_t h, const std::string& type, double lr = 0.7, double momentum = 0.9) {
  return c10::str(R"({"sync_every": )", h, R"(, "outer_optimizer": {"type": ")", type, R"(", "lr": )", lr,
                  R"(, "momentum": )", momentum, "}}");
}

struct LocalRun {
  testing::MlpLoss m = make_mlp();
  std::unique_ptr<Engine> engine;
  LocalRun(const config::Config& cfg, std::shared_ptr<comm::Communicator> dp) {
    engine = std::make_unique<Engine>(m.params, [this](const data::Batch& b) { return m.loss(b); }, cfg, std::move(dp));
  }
  // Steps until global step `to`; rank r's micro-batch of step k is its own slice of the data.
  void train_to(int64_t to, int rank, int world) {
    while (engine->global_steps() < to) {
      const int64_t k = engine->global_steps();
      engine->backward(engine->forward(testing::smooth_batch((k * world + rank) * kMicro, kMicro, kIn, kOut)));
      engine->step();
    }
  }
  at::Tensor flat() const {
    std::vector<at::Tensor> v;
    for (const auto& [n, p] : m.params) v.push_back(p.detach().reshape({-1}));
    return at::cat(v);
  }
};

std::shared_ptr<comm::Communicator> connect() {
  comm::CommOptions o;
  o.timeout_seconds = 60;
  return comm::Communicator::create(comm::rank_info_from_env(), o);
}

// All ranks' copies of `t`, for checking that a synchronised step leaves them identical.
at::Tensor gathered(comm::Communicator& c, const at::Tensor& t) {
  at::Tensor all = at::empty({c.size() * t.numel()}, t.options());
  c.all_gather(t.contiguous(), all);
  return all.view({c.size(), t.numel()});
}

TEST(LocalSgdWorker, Equivalences) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const int W = c->size(), rank = c->rank();
  const int64_t steps = 8;
  // H = 1 "average" with plain SGD is data parallelism.
  LocalRun dp(make_config(W, 0.0, ""), c);
  dp.train_to(steps, rank, W);
  LocalRun avg1(make_config(W, 0.0, local_sgd(1, "average")), c);
  avg1.train_to(steps, rank, W);
  // fp32: the ranks' updates are averaged after the step instead of the gradients before it, the same
  // terms in another order (~1e-7 relative per step); |θ| < 1, 8 steps.
  testing::expect_close(avg1.flat(), dp.flat(), 0, 2e-6, "H=1 average against data parallelism");

  // H = 4: nesterov with lr 1, momentum 0 is the average, at every step (inner SGD with momentum).
  LocalRun avg4(make_config(W, 0.9, local_sgd(4, "average")), c);
  LocalRun nes4(make_config(W, 0.9, local_sgd(4, "nesterov", 1.0, 0.0)), c);
  for (int64_t k = 1; k <= steps; ++k) {
    avg4.train_to(k, rank, W);
    nes4.train_to(k, rank, W);
    // anchor - (anchor - mean) rounds once more than mean: 1 ulp of |θ| < 1 per sync.
    testing::expect_close(nes4.flat(), avg4.flat(), 0, 1e-6, c10::str("nesterov(1, 0) against average, step ", k));
    const at::Tensor all = gathered(*c, avg4.flat());
    const bool synced = k % 4 == 0;
    EXPECT_EQ(at::equal(all[0], all[W - 1]), synced) << "step " << k << ": ranks differ exactly between syncs";
  }
  EXPECT_EQ(avg4.engine->local_sgd()->syncs(), steps / 4);

  // Bytes: Gloo's ring all-reduce sends 2(W-1)/W of the buffer per rank, a broadcast (W-1)/W.
  const int64_t N = avg4.engine->num_parameters();
  const auto ring = [W](int64_t bytes) { return 2 * (W - 1) * bytes / W; };
  const int64_t before = c->stats().sent_bytes;
  LocalRun counted(make_config(W, 0.9, local_sgd(4, "nesterov")), c);
  EXPECT_EQ(counted.engine->comm_bytes() - before, (W - 1) * N * 4 / W) << "the start: rank 0's parameters broadcast";
  const int64_t start = counted.engine->comm_bytes();
  counted.train_to(steps, rank, W);
  // Every step: the logged loss's mean (one fp64 scalar); every 4th: the fp32 parameters.
  EXPECT_EQ(counted.engine->comm_bytes() - start, steps * ring(8) + steps / 4 * ring(N * 4));
  const int64_t dp_start = c->stats().sent_bytes;
  LocalRun plain(make_config(W, 0.9, ""), c);
  const int64_t dp_built = plain.engine->comm_bytes();
  plain.train_to(steps, rank, W);
  // Plain data parallelism: every step all-reduces the (padded) fp32 gradient buffer in buckets.
  const int64_t padded = plain.engine->layout().numel;
  EXPECT_EQ(dp_built - dp_start, (W - 1) * padded * 4 / W);
  EXPECT_EQ(plain.engine->comm_bytes() - dp_built, steps * (ring(8) + ring(padded * 4)));
  c->barrier();
}

TEST(LocalSgdWorker, ResumeMidInterval) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const int W = c->size(), rank = c->rank();
  const std::string root = testing::worker_env("LOCAL_SGD_CKPT");
  const auto cfg = make_config(W, 0.9, local_sgd(4, "nesterov"));
  const auto save = [&](Engine& e, const std::string& dir, const std::string& tag) {
    checkpoint::CheckpointWriter w(dir, tag, rank);
    e.save_checkpoint(w);
    w.finish_rank();
    c->barrier();
    if (rank == 0) w.commit("{}", W);
    c->barrier();
  };
  LocalRun straight(cfg, c);
  straight.train_to(10, rank, W);
  save(*straight.engine, root + "/straight", "s10");
  {
    LocalRun first(cfg, c);
    first.train_to(6, rank, W);  // 6 = 4 + 2: mid-interval, ranks hold different parameters
    save(*first.engine, root + "/resumed", "s6");
  }
  LocalRun resumed(cfg, c);
  resumed.engine->load_checkpoint(checkpoint::CheckpointReader(root + "/resumed", "s6"));
  EXPECT_EQ(resumed.engine->local_sgd()->steps_since_sync(), 2);
  resumed.train_to(10, rank, W);
  testing::expect_equal(resumed.flat(), straight.flat(), c10::str("rank ", rank, " resumed at step 6"));
  save(*resumed.engine, root + "/resumed", "s10");
  if (rank == 0) {
    EXPECT_EQ(checkpoint::fingerprint(root + "/resumed/s10"), checkpoint::fingerprint(root + "/straight/s10"));
  }
}

testing::WorkerOptions two_ranks(testing::Env env = {}) {
  testing::WorkerOptions o;
  o.world_size = 2;
  o.timeout_s = 120;
  o.env = std::move(env);
  return o;
}

TEST(LocalSgd, TwoRanksMatchDataParallelAndNesterovWithoutMomentumAndCountBytes) {
  testing::expect_workers_ok(testing::run_workers("LocalSgdWorker.Equivalences", two_ranks()));
}

TEST(LocalSgd, CheckpointMidIntervalResumesExactly) {
  const testing::Env env{{"LOCAL_SGD_CKPT", testing::temp_dir("local_sgd_ckpt")}};
  testing::expect_workers_ok(testing::run_workers("LocalSgdWorker.ResumeMidInterval", two_ranks(env)));
}

// One rank: the mean is the rank's own parameters, so every outer step is torch.optim.SGD(nesterov)
// on the anchor with gradient anchor - θ (LibTorch's implementation, not ours).
TEST(LocalSgd, NesterovOuterStepMatchesTorchSgd) {
  parallel::LocalSgdOptions o;
  o.sync_every = 2;
  o.outer_optimizer = {"nesterov", 0.7, 0.9};
  std::vector<at::Tensor> params = {at::linspace(-1, 1, 12).view({3, 4}), at::linspace(0.5, -0.5, 5)};
  parallel::LocalSgd sync(o, params, comm::Communicator::single());
  std::vector<at::Tensor> anchor = {params[0].clone().requires_grad_(), params[1].clone().requires_grad_()};
  torch::optim::SGD reference(anchor, torch::optim::SGDOptions(0.7).momentum(0.9).nesterov(true));
  for (int outer = 0; outer < 4; ++outer) {
    for (int inner = 0; inner < 2; ++inner) {  // the inner optimizer's moves, different every step
      for (size_t i = 0; i < params.size(); ++i) params[i].add_(at::sin(params[i] * (3 + outer) + inner + static_cast<double>(i)) * 0.1);
      if (inner == 1) {  // the outer gradient: anchor minus the parameters the ranks arrived at
        for (size_t i = 0; i < params.size(); ++i) anchor[i].mutable_grad() = anchor[i].detach() - params[i];
      }
      EXPECT_EQ(sync.after_step(), inner == 1);
    }
    reference.step();
    for (size_t i = 0; i < params.size(); ++i) {
      // fp32, the same operations grouped differently: a few ulp of |θ| ≤ 2.
      testing::expect_close(params[i], anchor[i].detach(), 0, 2e-6, c10::str("outer step ", outer, " tensor ", i));
    }
  }
}

TEST(LocalSgd, RefusalsNameTheKey) {
  const auto base = make_config(1, 0.0, local_sgd(4, "average"));
  const auto refused = [&](auto change, const std::string& key) {
    auto c = base;
    change(c);
    const std::string m = testing::expect_usage_error([&] { check_local_sgd(c); });
    EXPECT_NE(m.find(key), std::string::npos) << m;
    EXPECT_NE(m.find("xtrain.local_sgd.sync_every"), std::string::npos) << m;
  };
  refused([](config::Config& c) { c.zero_optimization.stage = 1; }, "zero_optimization.stage must be 0, got 1");
  refused([](config::Config& c) { c.tensor_parallel.size = 2; }, "tensor_parallel.size must be 1, got 2");
  refused([](config::Config& c) { c.pipeline.stages = 2; }, "pipeline.stages must be 1, got 2");
  refused([](config::Config& c) { c.fp16.enabled = true; }, "fp16.enabled");
  refused([](config::Config& c) { c.bf16.enabled = true; }, "bf16.enabled");
  refused([](config::Config& c) { c.optimizer.type = "LBFGS"; }, "optimizer.type");
  check_local_sgd(base);  // stage 0, fp32: accepted
  auto off = base;
  off.local_sgd.sync_every = 0;
  off.zero_optimization.stage = 2;
  check_local_sgd(off);  // off: nothing to refuse
}

TEST(LocalSgd, ConfigKeysParseAndValidate) {
  const auto c = make_config(1, 0.0, local_sgd(16, "nesterov", 0.5, 0.8));
  EXPECT_EQ(c.local_sgd.sync_every, 16);
  EXPECT_EQ(c.local_sgd.outer_optimizer.type, "nesterov");
  EXPECT_EQ(c.local_sgd.outer_optimizer.lr, 0.5);
  EXPECT_EQ(c.local_sgd.outer_optimizer.momentum, 0.8);
  const auto defaults = make_config(1, 0.0, "");
  EXPECT_FALSE(defaults.local_sgd.enabled());
  EXPECT_EQ(defaults.local_sgd.outer_optimizer.type, "average");
  const auto error = [](const std::string& ls) {
    return testing::expect_usage_error([&] { make_config(1, 0.0, ls); });
  };
  EXPECT_NE(error(R"({"sync_every": -1})").find("xtrain.local_sgd.sync_every must be >= 0"), std::string::npos);
  EXPECT_NE(error(local_sgd(4, "nesterow")).find("xtrain.local_sgd.outer_optimizer.type"), std::string::npos);
  EXPECT_NE(error(local_sgd(4, "nesterov", 0.7, 1.0)).find("outer_optimizer.momentum must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error(R"({"sync_evry": 4})").find("sync_every"), std::string::npos);  // a typo names the key
}

}  // namespace
}  // namespace xtrain::local_sgd_test
