// NVMe offload of the ZeRO optimizer state through the engine: stages 1 and 2 with offload against
// the same stage without it over Gloo at 1 and 2 ranks, sharded checkpoints interchangeable with the
// in-memory strategy's, and the errors for bad settings at start. (The io_uring file and
// NvmeOptimizerState alone: nvme_offload_test.cpp.)
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "support/fixtures.h"
#include "support/mlp_loss.h"
#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/zero/shard_io.h"

namespace xtrain::nvme_offload_engine_test {
namespace {

// ---- Stages 1 and 2 with NVMe offload against the same stage in memory ----

constexpr int64_t kIn = 32, kHidden = 96, kOut = 5, kSteps = 8;

using Mlp = testing::MlpLoss;

// 3653 elements: 4 chunks of 1024 at one rank, 2 per rank at two (sub_group_size 1000).
Mlp make_mlp() {
  return testing::make_mlp_loss({{"fc1.weight", {kHidden, kIn}}, {"fc1.bias", {kHidden}}, {"fc2.weight", {kOut, kHidden}},
                                 {"fc2.bias", {kOut}}},
                                {0.71, 0.3, 0.3, 1.1});
}

data::Batch batch(int64_t first, int64_t count) { return testing::smooth_batch(first, count, kIn, kOut); }

struct Case {
  int stage;
  bool bf16;
  int64_t gas = 2;
  double clip = 0.05;  // binds: gradient norms are ~0.1-1
};

// `nvme_path` empty: in memory; else offloaded there in chunks of 1024 elements.
config::Config make_config(const Case& k, int64_t world, int64_t micro, const std::string& nvme_path) {
  const std::string text = c10::str(
      R"({"train_micro_batch_size_per_gpu": )", micro, R"(, "gradient_accumulation_steps": )", k.gas,
      R"(, "gradient_clipping": )", k.clip,
      R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.99], "weight_decay": 0.1}})",
      R"(, "bf16": {"enabled": )", k.bf16 ? "true" : "false", R"(}})");
  config::LoadOptions lo;
  lo.world_size = world;
  lo.quiet = true;
  auto cfg = config::load_text(text, lo).config;
  cfg.zero_optimization.stage = k.stage;
  cfg.zero_optimization.reduce_bucket_size = 1000;  // stage 2: several units
  cfg.zero_optimization.sub_group_size = 1000;
  cfg.aio.block_size = 8192;
  if (!nvme_path.empty()) {
    cfg.zero_optimization.offload_optimizer.device = "nvme";
    cfg.zero_optimization.offload_optimizer.nvme_path = nvme_path;
  }
  return cfg;
}

at::Tensor flat_params(const Mlp& m) {
  std::vector<at::Tensor> v;
  for (const auto& [n, p] : m.params) v.push_back(p.detach().to(at::kFloat).reshape({-1}));
  return at::cat(v);
}

// Steps [from, to): global micro-batch g is samples [g·W·micro, (g+1)·W·micro), rank r's the r-th micro.
void train(Engine& e, const Case& k, int64_t world, int64_t rank, int64_t from, int64_t to, int64_t micro) {
  for (int64_t s = from; s < to; ++s) {
    for (int64_t m = 0; m < k.gas; ++m) {
      const int64_t g = s * k.gas + m;
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

std::string rank_folder(const std::string& nvme_path, int64_t rank) {
  return c10::str(nvme_path, "/xtrain_rank", rank, "_", ::getpid());
}

TEST(NvmeWorker, MatchesInMemoryStrategy) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const std::string dir = testing::worker_env("XTRAIN_NVME_DIR");
  const int64_t W = c->size(), micro = 3;
  for (int stage : {1, 2}) {
    for (bool bf16 : {false, true}) {
      const Case k{stage, bf16};
      const std::string what = c10::str("stage ", stage, bf16 ? " bf16" : " fp32", " W ", W);
      Mlp mem = make_mlp(), off = make_mlp();
      Engine em(mem.params, [&mem](const data::Batch& b) { return mem.loss(b); }, make_config(k, W, micro, ""), c);
      {
        Engine eo(off.params, [&off](const data::Batch& b) { return off.loss(b); }, make_config(k, W, micro, dir), c);
        EXPECT_NE(eo.strategy().describe().find("on NVMe in " + rank_folder(dir, c->rank())), std::string::npos)
            << eo.strategy().describe();
        const auto mo = eo.memory(), mm = em.memory();
        const int64_t shard = em.layout().numel / W, chunks = (shard + 1023) / 1024;
        EXPECT_EQ(mo.disk_bytes, chunks * 3 * 1024 * 4) << what;  // master, exp_avg, exp_avg_sq per chunk
        EXPECT_EQ(mo.master_bytes, std::min<int64_t>(chunks, 3) * 1024 * 4) << what;  // the chunk buffers only
        EXPECT_EQ(mo.optimizer_bytes, 2 * mo.master_bytes) << what;
        EXPECT_EQ(mm.disk_bytes, 0);
        EXPECT_EQ(mo.param_bytes, mm.param_bytes);
        train(em, k, W, c->rank(), 0, kSteps, micro);
        train(eo, k, W, c->rank(), 0, kSteps, micro);
        EXPECT_EQ(eo.strategy().optimizer_step_count(), em.strategy().optimizer_step_count()) << what;
        // The same arithmetic on every element, only chunked: bit-identical in fp32 and bf16.
        testing::expect_equal(flat_params(off), flat_params(mem), "parameters with NVMe offload, " + what);
      }
      EXPECT_FALSE(std::filesystem::exists(rank_folder(dir, c->rank()))) << "files removed with the engine";
    }
  }
  c->barrier();
}

void run_nvme_workers(const std::string& test, int world, testing::Env env) {
  testing::WorkerOptions o;
  o.world_size = world;
  o.timeout_s = 120;
  o.env = std::move(env);
  testing::expect_workers_ok(testing::run_workers(test, o));
}

TEST(NvmeOffload, StagesOneAndTwoMatchInMemoryAtOneAndTwoRanks) {
  for (int world : {1, 2}) {
    run_nvme_workers("NvmeWorker.MatchesInMemoryStrategy", world, {{"XTRAIN_NVME_DIR", testing::temp_dir("nvme_e")}});
  }
}

// Phase "save": kSteps/2 steps in memory and with NVMe offload at this world size, a checkpoint of
// each; the two consolidate to the same tensors. Phase "resume" (at another world size): each
// checkpoint loaded with and without offload, kSteps/2 more steps: all bit-identical.
TEST(NvmeWorker, CheckpointInterchange) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const std::string root = testing::worker_env("XTRAIN_NVME_CKPT"), dir = testing::worker_env("XTRAIN_NVME_DIR");
  const int64_t W = c->size(), micro = 12 / W;  // the global batch stays 12 samples
  const Case k{std::stoi(testing::worker_env("XTRAIN_ZERO_STAGE")), false};
  auto engine = [&](Mlp& m, bool offload) {
    return std::make_unique<Engine>(m.params, [&m](const data::Batch& b) { return m.loss(b); },
                                    make_config(k, W, micro, offload ? dir : ""), c);
  };
  if (testing::worker_env("XTRAIN_NVME_PHASE") == "save") {
    for (bool offload : {false, true}) {
      Mlp m = make_mlp();
      auto e = engine(m, offload);
      train(*e, k, W, c->rank(), 0, kSteps / 2, micro);
      checkpoint::CheckpointWriter w(root + (offload ? "/nvme" : "/mem"), "half", c->rank());
      e->save_checkpoint(w);
      w.finish_rank();
      c->barrier();
      if (c->rank() == 0) w.commit("{}", W);
      c->barrier();
    }
    if (c->rank() == 0) {
      const auto a = zero::consolidate(checkpoint::CheckpointReader(root + "/nvme"), true);
      const auto b = zero::consolidate(checkpoint::CheckpointReader(root + "/mem"), true);
      ASSERT_EQ(a.model.size(), b.model.size());
      ASSERT_EQ(a.optimizer.size(), b.optimizer.size());
      EXPECT_EQ(a.optimizer.size(), 2 * b.model.size());
      for (size_t i = 0; i < a.model.size(); ++i) {
        EXPECT_EQ(a.model[i].first, b.model[i].first);
        testing::expect_equal(a.model[i].second, b.model[i].second, "checkpoint model " + a.model[i].first);
      }
      for (size_t i = 0; i < a.optimizer.size(); ++i) {
        EXPECT_EQ(a.optimizer[i].first, b.optimizer[i].first);
        testing::expect_equal(a.optimizer[i].second, b.optimizer[i].second, "checkpoint " + a.optimizer[i].first);
      }
    }
    c->barrier();
    return;
  }
  auto resume = [&](const std::string& which, bool offload) {
    Mlp m = make_mlp();
    auto e = engine(m, offload);
    e->load_checkpoint(checkpoint::CheckpointReader(root + "/" + which));
    EXPECT_EQ(e->global_steps(), kSteps / 2);
    EXPECT_EQ(e->strategy().optimizer_step_count(), kSteps / 2);
    train(*e, k, W, c->rank(), kSteps / 2, kSteps, micro);
    return flat_params(m);
  };
  const auto ref = resume("mem", false);
  testing::expect_equal(resume("nvme", false), ref, c10::str("NVMe checkpoint resumed in memory at W ", W));
  testing::expect_equal(resume("mem", true), ref, c10::str("in-memory checkpoint resumed with NVMe at W ", W));
  testing::expect_equal(resume("nvme", true), ref, c10::str("NVMe checkpoint resumed with NVMe at W ", W));
  c->barrier();
}

void interchange(int save_world, int resume_world, int stage) {
  testing::Env env{{"XTRAIN_NVME_CKPT", testing::temp_dir("nvme_ckpt")},
                   {"XTRAIN_NVME_DIR", testing::temp_dir("nvme_ckpt_state")},
                   {"XTRAIN_ZERO_STAGE", std::to_string(stage)},
                   {"XTRAIN_NVME_PHASE", "save"}};
  run_nvme_workers("NvmeWorker.CheckpointInterchange", save_world, env);
  env["XTRAIN_NVME_PHASE"] = "resume";
  run_nvme_workers("NvmeWorker.CheckpointInterchange", resume_world, env);
}

TEST(NvmeOffload, Stage2CheckpointFromTwoRanksLoadsAtOneWithAndWithoutOffload) { interchange(2, 1, 2); }
TEST(NvmeOffload, Stage1CheckpointFromOneRankLoadsAtTwoWithAndWithoutOffload) { interchange(1, 2, 1); }

// Through the engine: each bad setting names its key.
std::string engine_error(const config::Config& cfg) {
  Mlp m = make_mlp();
  try {
    Engine e(m.params, [&m](const data::Batch& b) { return m.loss(b); }, cfg);
  } catch (const UsageError& err) {
    return err.what();
  }
  return "";
}

TEST(NvmeOffload, BadSettingsFailAtStartNamingTheKey) {
  const auto dir = testing::temp_dir("nvme_engine_bad");
  auto cfg = make_config({1, false}, 1, 3, dir);
  EXPECT_EQ(engine_error(cfg), "");
  cfg.zero_optimization.offload_optimizer.nvme_path = "";
  EXPECT_NE(engine_error(cfg).find("offload_optimizer.nvme_path"), std::string::npos) << engine_error(cfg);
  std::ofstream(dir + "/a_file") << "x";
  cfg.zero_optimization.offload_optimizer.nvme_path = dir + "/a_file";
  auto msg = engine_error(cfg);
  EXPECT_NE(msg.find(dir + "/a_file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("zero_optimization.offload_optimizer.nvme_path"), std::string::npos) << msg;
  cfg.zero_optimization.offload_optimizer.nvme_path = dir;
  cfg.zero_optimization.stage = 0;
  msg = engine_error(cfg);
  EXPECT_NE(msg.find("offload_optimizer.device nvme needs zero_optimization.stage"), std::string::npos) << msg;
  cfg.zero_optimization.stage = 2;
  cfg.aio.block_size = 1000;
  msg = engine_error(cfg);
  EXPECT_NE(msg.find("(aio.block_size)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace xtrain::nvme_offload_engine_test
