// 8-bit Adam state (optimizer.params.state_dtype "int8") through the engine at every ZeRO stage,
// over Gloo at 2 ranks: a checkpoint of the 8-bit state resumes bit-identically to the
// uninterrupted run, in memory and with NVMe offload (stages 1-3), and the offloaded run is
// bit-identical to the in-memory one (its chunks are cut at quantisation blocks); the state takes
// 2 bytes + 8 bytes per 2048 values in memory and on disk; loading it at another data-parallel size
// or into an fp32-state run is refused by name.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include "support/errors.h"
#include "support/fixtures.h"
#include "support/mlp_loss.h"
#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"

namespace xtrain::adam8bit_zero_test {
namespace {

constexpr int64_t kIn = 32, kHidden = 256, kOut = 5, kSteps = 6, kGas = 2;

using Mlp = testing::MlpLoss;

// 9733 elements: several quantisation blocks per rank at two ranks.
Mlp make_mlp() {
  return testing::make_mlp_loss({{"fc1.weight", {kHidden, kIn}}, {"fc1.bias", {kHidden}}, {"fc2.weight", {kOut, kHidden}},
                                 {"fc2.bias", {kOut}}},
                                {0.37, 0.2, 0.2, 0.9});
}

data::Batch batch(int64_t first, int64_t count) { return testing::smooth_batch(first, count, kIn, kOut, 0.11, 0.07); }

config::Config make_config(int stage, int64_t world, int64_t micro, const std::string& nvme_path,
                           const char* state_dtype = "int8") {
  const std::string text = c10::str(
      R"({"train_micro_batch_size_per_gpu": )", micro, R"(, "gradient_accumulation_steps": )", kGas,
      R"(, "gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.99],)",
      R"( "weight_decay": 0.1, "state_dtype": ")", state_dtype, R"("}}})");
  config::LoadOptions lo;
  lo.world_size = world;
  lo.quiet = true;
  auto cfg = config::load_text(text, lo).config;
  cfg.zero_optimization.stage = stage;
  cfg.zero_optimization.reduce_bucket_size = 3000;  // stage 2: several units
  cfg.zero_optimization.sub_group_size = 3000;     // NVMe: chunks of 4096 (2 blocks)
  cfg.aio.block_size = 8192;
  if (!nvme_path.empty()) {
    cfg.zero_optimization.offload_optimizer.device = "nvme";
    cfg.zero_optimization.offload_optimizer.nvme_path = nvme_path;
  }
  return cfg;
}

at::Tensor flat_params(const Mlp& m) {
  std::vector<at::Tensor> v;
  for (const auto& [n, p] : m.params) v.push_back(p.detach().reshape({-1}));
  return at::cat(v);
}

void train(Engine& e, int64_t world, int64_t rank, int64_t from, int64_t to, int64_t micro) {
  for (int64_t s = from; s < to; ++s) {
    for (int64_t m = 0; m < kGas; ++m) {
      const int64_t g = s * kGas + m;
      e.backward(e.forward(batch((g * world + rank) * micro, micro)));
      e.step();
    }
  }
}

std::shared_ptr<comm::Communicator> connect() {
  comm::CommOptions o;
  o.timeout_seconds = 60;
  return comm::Communicator::create(comm::rank_info_from_env(), o);
}

int64_t state_bytes(int64_t numel) { return 2 * numel + 2 * 4 * ((numel + 2047) / 2048); }

// Straight kSteps against kSteps/2 + checkpoint + a fresh engine + kSteps/2, per stage and offload.
TEST(Adam8bitWorker, ResumeIsBitExactAtEveryStage) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const std::string root = testing::worker_env("XTRAIN_8BIT_CKPT"), dir = testing::worker_env("XTRAIN_NVME_DIR");
  const int64_t W = c->size(), micro = 12 / W;
  for (int stage : {0, 1, 2, 3}) {
    at::Tensor in_memory;
    for (bool offload : {false, true}) {
      if (offload && stage == 0) continue;
      const std::string what = c10::str("stage ", stage, offload ? " NVMe" : " in memory", " W ", W);
      auto engine = [&](Mlp& m) {
        return std::make_unique<Engine>(m.params, [&m](const data::Batch& b) { return m.loss(b); },
                                        make_config(stage, W, micro, offload ? dir : ""), c);
      };
      Mlp a = make_mlp();
      auto ea = engine(a);
      const auto mem = ea->memory();
      const int64_t numel = stage == 0 ? ea->layout().numel : ea->layout().numel / W;
      if (offload) {
        // Chunks of 4096: the fp32 master (16 KiB), the codes (4 KiB each) and absmax (padded to 4 KiB each).
        EXPECT_EQ(mem.disk_bytes, (numel + 4095) / 4096 * (16384 + 4 * 4096)) << what;
      } else {
        EXPECT_EQ(mem.optimizer_bytes, state_bytes(numel)) << what;
      }
      train(*ea, W, c->rank(), 0, kSteps, micro);
      const std::string ckpt = c10::str(root, "/stage", stage, offload ? "_nvme" : "_mem");
      {
        Mlp b = make_mlp();
        auto eb = engine(b);
        train(*eb, W, c->rank(), 0, kSteps / 2, micro);
        checkpoint::CheckpointWriter w(ckpt, "half", c->rank());
        eb->save_checkpoint(w);
        w.finish_rank();
        c->barrier();
        if (c->rank() == 0) w.commit("{}", W);
        c->barrier();
      }
      Mlp r = make_mlp();
      auto er = engine(r);
      er->load_checkpoint(checkpoint::CheckpointReader(ckpt));
      EXPECT_EQ(er->strategy().optimizer_step_count(), kSteps / 2) << what;
      train(*er, W, c->rank(), kSteps / 2, kSteps, micro);
      testing::expect_equal(flat_params(r), flat_params(a), "resumed 8-bit state, " + what);
      if (offload) testing::expect_equal(flat_params(a), in_memory, "NVMe against in memory, " + what);
      in_memory = flat_params(a);
    }
  }
  c->barrier();
}

// The stage-2 checkpoint of 2 ranks loaded at this world size, and into an fp32-state run.
TEST(Adam8bitWorker, OtherLayoutsAreRefused) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const std::string ckpt = testing::worker_env("XTRAIN_8BIT_CKPT") + "/stage2_mem";
  const int64_t W = c->size(), micro = 12 / W;
  Mlp m = make_mlp();
  Engine e(m.params, [&m](const data::Batch& b) { return m.loss(b); }, make_config(2, W, micro, ""), c);
  const auto msg = testing::expect_usage_error([&] { e.load_checkpoint(checkpoint::CheckpointReader(ckpt)); });
  EXPECT_NE(msg.find("Resharding 8-bit state is not supported yet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("optimizer.params.state_dtype"), std::string::npos) << msg;
  Mlp f = make_mlp();
  Engine ef(f.params, [&f](const data::Batch& b) { return f.loss(b); }, make_config(2, W, micro, "", "fp32"), c);
  const auto fp32 = testing::expect_usage_error([&] { ef.load_checkpoint(checkpoint::CheckpointReader(ckpt)); });
  EXPECT_NE(fp32.find("holds 8-bit optimizer state"), std::string::npos) << fp32;
  ef.load_checkpoint(checkpoint::CheckpointReader(ckpt), /*load_optimizer=*/false);  // the weights alone load
  c->barrier();
}

void run_workers(const std::string& test, int world, const testing::Env& env) {
  testing::WorkerOptions o;
  o.world_size = world;
  o.timeout_s = 180;
  o.env = env;
  testing::expect_workers_ok(testing::run_workers(test, o));
}

TEST(Adam8bitZero, CheckpointsResumeBitExactlyAtTwoRanksAndOtherLayoutsAreRefused) {
  const testing::Env env{{"XTRAIN_8BIT_CKPT", testing::temp_dir("adam8bit_ckpt")},
                         {"XTRAIN_NVME_DIR", testing::temp_dir("adam8bit_nvme")}};
  run_workers("Adam8bitWorker.ResumeIsBitExactAtEveryStage", 2, env);
  run_workers("Adam8bitWorker.OtherLayoutsAreRefused", 1, env);
}

}  // namespace
}  // namespace xtrain::adam8bit_zero_test
