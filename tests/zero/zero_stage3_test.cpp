// ZeRO stage 3 over Gloo with 1, 2 and 4 ranks against stage 0 on one rank processing the whole
// global batch: a torch::nn::Sequential model (its children become units, wrapped in place) and a
// GPT (its blocks, through nn::UnitRouted), fp32 and bf16, with gradient accumulation, clipping,
// prefetch and a live-parameter cap. Also: between uses a partitioned parameter holds no data;
// per-rank model-state bytes are the ZeRO paper's 16Ψ/N; a stage-3 checkpoint written at 2 ranks
// resumes at 1 and 4 and consolidates into a plain model. Construction into file-backed memory:
// zero_stage3_memory_test.cpp.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdlib>
#include <fstream>

#include "support/fixtures.h"
#include "support/mlp_loss.h"
#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_checkpointing.h"
#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/stage3.h"

namespace xtrain::zero_stage3_test {
namespace {

constexpr int64_t kB = 3;  // micro-batch per rank
constexpr int64_t kSteps = 20;

using Seq = std::shared_ptr<torch::nn::SequentialImpl>;

// Linear(8, 24) Tanh Linear(24, 24) Tanh Linear(24, 5), weights from a formula (the same on every
// rank and in every reference).
Seq make_seq() {
  auto seq = std::make_shared<torch::nn::SequentialImpl>();
  seq->push_back(torch::nn::Linear(8, 24));
  seq->push_back(torch::nn::Tanh());
  seq->push_back(torch::nn::Linear(24, 24));
  seq->push_back(torch::nn::Tanh());
  seq->push_back(torch::nn::Linear(24, 5));
  at::NoGradGuard no_grad;
  double seed = 0.3;
  for (auto& p : seq->parameters()) {
    p.copy_((at::arange(p.numel(), at::kDouble) * 0.71 + seed).sin().mul(0.4).view(p.sizes()));
    seed += 1.1;
  }
  return seq;
}

data::Batch batch(int64_t first, int64_t count) { return testing::smooth_batch(first, count, 8, 5); }

at::Tensor seq_loss(const Seq& seq, const data::Batch& b) {
  return (seq->forward(b.input).to(at::kFloat) - b.target).pow(2).mean();
}

struct Case {
  int stage = 3;
  bool bf16 = false;
  int64_t gas = 1;
  double clip = 0.0;
  std::string accum = "fp32";
  int64_t persistence = 30;  // the biases (24, 5 elements) stay whole, the weights are partitioned
  int64_t prefetch = 1000;
  int64_t max_live = 1000000000;
  std::string nvme;          // offload_optimizer.device nvme into this folder
  bool nvme_params = false;  // offload_param.device nvme too
};

config::Config make_config(const Case& k, int64_t world, int64_t micro) {
  const std::string text = c10::str(
      R"({"train_micro_batch_size_per_gpu": )", micro, R"(, "gradient_accumulation_steps": )", k.gas,
      R"(, "gradient_clipping": )", k.clip,
      R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.99], "weight_decay": 0.1}})",
      R"(, "bf16": {"enabled": )", k.bf16 ? "true" : "false", R"(}, "data_types": {"grad_accum_dtype": ")", k.accum,
      R"("}, "zero_optimization": {"stage": )", k.stage, R"(, "reduce_bucket_size": 40)",
      R"(, "stage3_param_persistence_threshold": )", k.persistence, R"(, "stage3_prefetch_bucket_size": )", k.prefetch,
      R"(, "stage3_max_live_parameters": )", k.max_live, R"(}})");
  config::LoadOptions lo;
  lo.world_size = world;
  lo.quiet = true;
  auto cfg = config::load_text(text, lo).config;
  if (!k.nvme.empty()) {
    cfg.zero_optimization.offload_optimizer.device = "nvme";
    cfg.zero_optimization.offload_optimizer.nvme_path = k.nvme;
    cfg.zero_optimization.sub_group_size = 300;  // several chunks, the last one short
  }
  if (k.nvme_params) {
    cfg.zero_optimization.offload_param.device = "nvme";
    cfg.zero_optimization.offload_param.nvme_path = k.nvme;
  }
  return cfg;
}

at::Tensor flat(const zero::NamedParams& params) {
  std::vector<at::Tensor> v;
  for (const auto& [n, p] : params) v.push_back(p.detach().to(at::kFloat).reshape({-1}));
  return at::cat(v);
}

std::vector<double> train(Engine& e, int64_t gas, int64_t world, int64_t rank, int64_t from, int64_t to,
                          int64_t micro = kB) {
  std::vector<double> norms;
  for (int64_t s = from; s < to; ++s) {
    for (int64_t m = 0; m < gas; ++m) {
      const int64_t g = s * gas + m;
      e.backward(e.forward(batch(g * world * micro + rank * micro, micro)));
      if (e.step()) norms.push_back(e.last_step().grad_norm);
    }
  }
  return norms;
}

// Stage 0 on one rank over the whole global batch.
at::Tensor reference(const Case& k, int64_t world, std::vector<double>* norms) {
  Case k0 = k;
  k0.stage = 0;
  auto seq = make_seq();
  Engine e(seq, [&seq](const data::Batch& b) { return seq_loss(seq, b); }, make_config(k0, 1, kB * world));
  *norms = train(e, k.gas, 1, 0, 0, kSteps, kB * world);
  return flat(e.full_parameters());
}

std::string name(const Case& k, int64_t W) {
  return c10::str("stage ", k.stage, k.bf16 ? " bf16/" + k.accum : " fp32", " gas ", k.gas, " clip ", k.clip,
                  " persistence ", k.persistence, " prefetch ", k.prefetch, " max_live ", k.max_live, " W ", W);
}

void check_same_on_all_ranks(comm::Communicator& c, const at::Tensor& t, const std::string& what) {
  auto all = at::zeros({c.size() * t.numel()}, at::kFloat);
  c.all_gather(t.contiguous(), all);
  for (int r = 0; r < c.size(); ++r) testing::expect_equal(all.narrow(0, r * t.numel(), t.numel()), t, what);
}

at::Tensor run(const std::shared_ptr<comm::Communicator>& c, const Case& k, std::vector<double>* norms) {
  auto seq = make_seq();
  Engine e(seq, [&seq](const data::Batch& b) { return seq_loss(seq, b); }, make_config(k, c->size(), kB), c);
  *norms = train(e, k.gas, c->size(), c->rank(), 0, kSteps);
  if (!k.nvme.empty()) {
    EXPECT_GT(e.memory().disk_bytes, 0) << "optimizer state on NVMe";
  }
  if (k.stage == 3) {
    const auto* s3 = dynamic_cast<const zero::Stage3Strategy*>(&e.strategy());
    EXPECT_NE(s3, nullptr);
    if (s3 != nullptr) {
      // The three weights are units; between steps they hold no data, the biases stay whole.
      EXPECT_EQ(s3->num_partitioned_units(), 3u);
      const auto fresh = make_seq()->named_parameters();
      for (const auto& p : seq->named_parameters()) {
        const bool partitioned = fresh[p.key()].numel() > k.persistence;
        EXPECT_EQ(p.value().numel() == 0, partitioned) << p.key() << " " << name(k, c->size());
      }
      // Live gathered elements: the unit in use plus prefetched ones, capped by max_live (each unit
      // is 192-576 elements padded to W x 16).
      const int64_t biggest = 24 * 24 + 24 + 16 * c->size();
      EXPECT_LE(s3->peak_live_numel(), std::max<int64_t>(k.max_live, biggest) + biggest) << name(k, c->size());
      if (k.max_live < 600) {
        EXPECT_LE(s3->peak_live_numel(), biggest) << name(k, c->size());
      }
    }
  }
  return flat(e.full_parameters());
}

void run_parity(const std::shared_ptr<comm::Communicator>& c, const Case& k) {
  const int64_t W = c->size();
  std::vector<double> norms, ref_norms;
  const auto got = run(c, k, &norms);
  check_same_on_all_ranks(*c, got, "parameters identical on every rank, " + name(k, W));
  const auto ref = reference(k, W, &ref_norms);
  if (!k.bf16) {
    // As the stage 1/2 parity test: the same sums in another order, amplified by Adam over 20 steps.
    testing::expect_close(got, ref, 1e-4, 2e-6, name(k, W));
    testing::expect_close(at::tensor(norms, at::kDouble), at::tensor(ref_norms, at::kDouble), 1e-5, 0,
                          "gradient norms, " + name(k, W));
    return;
  }
  // bf16: per-rank gradients round differently from the whole batch's (see zero_parity_test.cpp);
  // against stage 0 at the same W the parameters agree to about one bf16 ulp.
  testing::expect_close(got, ref, 2e-2, 3e-2, name(k, W));
  Case k0 = k;
  k0.stage = 0;
  std::vector<double> n0;
  // With bf16 accumulation stage 3 rounds each micro-batch's reduced gradient to bf16 before adding
  // (as DeepSpeed's stage 2/3), stage 0 adds the micro-batches in bf16 first: a near-zero gradient
  // whose sign flips moves a parameter by up to lr (0.01) in that step.
  const double atol = k.accum == "bf16" && k.gas > 1 ? 1.2e-2 : 1e-3;
  testing::expect_close(got, run(c, k0, &n0), 8e-3, atol, name(k, W) + " vs stage 0 at the same W");
}

// 16Ψ/N bytes of model state per rank for mixed-precision Adam (bf16 parameters and gradients, fp32
// master and moments) when every parameter is partitioned, within 5% plus the padding's 16 bytes.
void check_memory(const std::shared_ptr<comm::Communicator>& c) {
  Case k;
  k.bf16 = true;
  k.accum = "bf16";
  k.persistence = 0;
  auto seq = make_seq();
  Engine e(seq, [&seq](const data::Batch& b) { return seq_loss(seq, b); }, make_config(k, c->size(), kB), c);
  const double psi = static_cast<double>(e.layout().used), n = static_cast<double>(c->size());
  const double expect = 16 * psi / n;
  const double padding = 16.0 * static_cast<double>(e.layout().numel - e.layout().used) / n;
  const double got = static_cast<double>(e.memory().total());
  EXPECT_LE(std::abs(got - expect), 0.05 * expect + padding)
      << "W " << n << ": " << got << " bytes, formula " << expect << " (psi " << psi << ")";
}

std::shared_ptr<comm::Communicator> connect() {
  comm::CommOptions o;
  o.timeout_seconds = 60;
  return comm::Communicator::create(comm::rank_info_from_env(), o);
}

TEST(ZeroStage3Worker, MatchesStageZeroOnOneRank) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  check_memory(c);
  std::vector<Case> cases;
  for (bool bf16 : {false, true}) {
    Case k;
    k.bf16 = bf16;
    cases.push_back(k);
    k.gas = 2;
    k.clip = 0.05;  // binds: gradient norms are ~0.1-1
    cases.push_back(k);
  }
  Case k;
  k.bf16 = true;
  k.accum = "bf16";
  k.gas = 2;
  cases.push_back(k);
  k = Case{};
  k.persistence = 0;  // the biases are partitioned too
  k.prefetch = 0;     // no prefetch
  cases.push_back(k);
  k.max_live = 300;  // at most one unit gathered at a time
  k.prefetch = 100000;
  cases.push_back(k);
  for (const auto& kk : cases) run_parity(c, kk);
  c->barrier();
}

// A GPT: blocks are units (nn::UnitRouted); embeddings and the final norm are persistent.
models::GPT make_gpt(double dropout) {
  models::ModelOptions o;
  o.layers = 3;
  o.d_model = 32;
  o.heads = 2;
  o.seq_len = 16;
  o.vocab = 40;
  o.dropout = dropout;
  torch::manual_seed(7);
  return models::GPT(o);
}

data::Batch tokens(int64_t first, int64_t count) {
  auto i = at::arange(first, first + count, at::kLong).unsqueeze(1);
  auto t = (i * 7 + at::arange(0, 17, at::kLong) * 3 + (i * at::arange(0, 17, at::kLong)) % 5) % 40;
  return {t.narrow(1, 0, 16).contiguous(), t.narrow(1, 1, 16).contiguous()};
}

at::Tensor gpt_loss(models::GPT& gpt, const data::Batch& b) {
  auto logits = gpt->forward(b.input);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(at::kFloat), b.target.reshape({-1}));
}

at::Tensor train_gpt(const std::shared_ptr<comm::Communicator>& c, int stage, int64_t world, int64_t rank,
                     int64_t micro, double dropout, bool checkpointing, double clip, std::vector<double>* losses,
                     int64_t gas = 2) {
  auto gpt = make_gpt(dropout);
  if (checkpointing) {
    nn::ActivationCheckpointingOptions ac;
    ac.enabled = true;
    models::apply_activation_checkpointing(*gpt, ac);
  }
  Case k;
  k.stage = stage;
  k.persistence = 100;  // LayerNorm weights and biases whole, the block matrices partitioned
  k.prefetch = 5000;
  k.gas = gas;
  k.clip = clip;
  Engine e(gpt.ptr(), [&gpt](const data::Batch& b) { return gpt_loss(gpt, b); }, make_config(k, world, micro), c);
  torch::manual_seed(11);  // dropout draws
  for (int64_t s = 0; s < 6; ++s) {
    for (int64_t m = 0; m < k.gas; ++m) {
      const int64_t g = s * k.gas + m;
      e.backward(e.forward(tokens(g * world * micro + rank * micro, micro)));
      if (e.step() && losses) losses->push_back(e.last_step().loss);
    }
  }
  if (stage == 3) {
    const auto* s3 = dynamic_cast<const zero::Stage3Strategy*>(&e.strategy());
    EXPECT_TRUE(s3 != nullptr && s3->num_partitioned_units() == 3u);
    EXPECT_EQ(gpt->blocks[0]->as<nn::BlockImpl>()->mlp->parameters()[0].numel(), 0);
  }
  return flat(e.full_parameters());
}

// Optimizer state on NVMe (stepped in chunks through io_uring), and then the parameter shards too,
// change nothing: the same bits as stage 3 in memory, fp32 and bf16, with accumulation and clipping.
TEST(ZeroStage3Worker, NvmeOffloadMatchesInMemory) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  for (bool bf16 : {false, true}) {
    Case k;
    k.bf16 = bf16;
    k.gas = 2;
    k.clip = 0.05;
    std::vector<double> n_mem, n_disk;
    const auto in_memory = run(c, k, &n_mem);
    k.nvme = testing::worker_env("XTRAIN_ZERO_NVME");
    const auto on_disk = run(c, k, &n_disk);
    testing::expect_equal(on_disk, in_memory, c10::str("stage 3, optimizer on NVMe vs in memory, bf16 ", bf16));
    EXPECT_EQ(n_disk, n_mem);
    k.nvme_params = true;  // and the parameter shards: read from the file at every gather
    std::vector<double> n_both;
    testing::expect_equal(run(c, k, &n_both), in_memory, c10::str("stage 3, optimizer and parameters on NVMe, bf16 ", bf16));
    EXPECT_EQ(n_both, n_mem);
  }
  c->barrier();
}

TEST(ZeroStage3Worker, GptMatchesStageZero) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const int64_t W = c->size(), micro = 2;
  std::vector<double> losses, ref_losses;
  const auto got = train_gpt(c, 3, W, c->rank(), micro, 0.0, false, 0.5, &losses);
  check_same_on_all_ranks(*c, got, "GPT parameters identical on every rank");
  // Against stage 0 at the same W without accumulation or clipping: two ranks' gradients summed the
  // same way (a + b), so the same bits. (With accumulation stage 0 reduces (a1 + a2) + (b1 + b2),
  // stage 3 (a1 + b1) + (a2 + b2); clipping multiplies by a norm summed in another order.)
  std::vector<double> l3, l0;
  const auto got1 = train_gpt(c, 3, W, c->rank(), micro, 0.0, false, 0.0, &l3, /*gas=*/1);
  const auto same_w = train_gpt(c, 0, W, c->rank(), micro, 0.0, false, 0.0, &l0, /*gas=*/1);
  testing::expect_equal(got1, same_w, c10::str("GPT stage 3 vs stage 0 at W ", W, ", no accumulation or clipping"));
  // Against one rank over the global batch: per-rank means, then their mean, amplified by Adam where
  // a gradient is near zero (a sign flip moves that element by up to lr = 0.01 per step).
  const auto ref = train_gpt(comm::Communicator::single(), 0, 1, 0, micro * W, 0.0, false, 0.5, &ref_losses);
  testing::expect_close(got, ref, 1e-4, 1e-4, c10::str("GPT stage 3 at W ", W, " vs stage 0 on one rank"));
  testing::expect_close(at::tensor(losses, at::kDouble), at::tensor(ref_losses, at::kDouble), 1e-5, 0,
                        "GPT losses");
  c->barrier();
}

// One rank, no clipping: stage 3 runs the same operations as stage 0 (the gather is a copy), so with
// dropout and activation checkpointing (recomputation inside the gathered unit) the results are
// bit-identical. (Clipping would multiply by a norm summed in another order.)
TEST(ZeroStage3, GptWithDropoutAndCheckpointingIsBitIdenticalOnOneRank) {
  auto one = comm::Communicator::single();
  for (bool checkpointing : {false, true}) {
    std::vector<double> losses, ref_losses;
    const auto got = train_gpt(one, 3, 1, 0, 2, 0.1, checkpointing, 0.0, &losses);
    const auto ref = train_gpt(one, 0, 1, 0, 2, 0.1, checkpointing, 0.0, &ref_losses);
    testing::expect_equal(got, ref, c10::str("stage 3 vs 0, checkpointing ", checkpointing));
    EXPECT_EQ(losses, ref_losses);
  }
}

// Phase "save": 10 steps at this world size, a checkpoint, consolidation. Phase "resume": load it
// (written at another world size), 10 more steps, compare with 20 uninterrupted steps here.
TEST(ZeroStage3Worker, CheckpointReshards) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const std::string root = testing::worker_env("XTRAIN_ZERO_CKPT");
  const int64_t W = c->size(), micro = 12 / W;
  Case k;
  k.gas = 2;
  k.clip = 0.05;
  auto seq = make_seq();
  Engine e(seq, [&seq](const data::Batch& b) { return seq_loss(seq, b); }, make_config(k, W, micro), c);
  if (testing::worker_env("XTRAIN_ZERO_PHASE") == "save") {
    train(e, k.gas, W, c->rank(), 0, kSteps / 2, micro);
    checkpoint::CheckpointWriter w(root, "half", c->rank());
    e.save_checkpoint(w);
    w.finish_rank();
    const auto params = e.full_parameters();
    const auto probe = batch(1000, 7);
    at::Tensor engine_out;
    {
      at::NoGradGuard no_grad;
      engine_out = seq->forward(probe.input);  // the units gather under no_grad too
    }
    c->barrier();
    if (c->rank() == 0) {
      w.commit("{}", W);
      const auto full = zero::consolidate(checkpoint::CheckpointReader(root), /*with_optimizer=*/true);
      ASSERT_EQ(full.model.size(), params.size());
      std::map<std::string, at::Tensor> by_name(full.model.begin(), full.model.end());
      for (const auto& [n, p] : params) testing::expect_equal(by_name.at(n), p, "consolidated " + n);
      zero::write_consolidated(checkpoint::CheckpointReader(root), root + "/consolidated");
      auto plain = make_seq();  // a plain module, no engine
      std::map<std::string, at::Tensor> saved;
      for (auto& [n, v] : checkpoint::CheckpointReader(root + "/consolidated").read_tensors("model.pt")) saved[n] = v;
      at::NoGradGuard no_grad;
      for (auto& p : plain->named_parameters()) p.value().copy_(saved.at(p.key()));
      testing::expect_equal(plain->forward(probe.input), engine_out, "consolidated model's outputs");
    }
    c->barrier();
    return;
  }
  e.load_checkpoint(checkpoint::CheckpointReader(root));
  EXPECT_EQ(e.global_steps(), kSteps / 2);
  train(e, k.gas, W, c->rank(), kSteps / 2, kSteps, micro);
  auto ref_seq = make_seq();
  Engine r(ref_seq, [&ref_seq](const data::Batch& b) { return seq_loss(ref_seq, b); }, make_config(k, W, micro), c);
  train(r, k.gas, W, c->rank(), 0, kSteps, micro);
  testing::expect_close(flat(e.full_parameters()), flat(r.full_parameters()), 1e-4, 2e-6, c10::str("resumed at W ", W));
  c->barrier();
}

void workers(const std::string& test, int world, std::map<std::string, std::string> env = {}) {
  testing::WorkerOptions o;
  o.world_size = world;
  o.timeout_s = 180;
  o.env = std::move(env);
  testing::expect_workers_ok(testing::run_workers(test, o));
}

TEST(ZeroStage3, OneRankMatchesStageZero) { workers("ZeroStage3Worker.MatchesStageZeroOnOneRank", 1); }
TEST(ZeroStage3, TwoRanksMatchStageZero) { workers("ZeroStage3Worker.MatchesStageZeroOnOneRank", 2); }
TEST(ZeroStage3, FourRanksMatchStageZero) { workers("ZeroStage3Worker.MatchesStageZeroOnOneRank", 4); }
TEST(ZeroStage3, GptTwoRanksMatchesStageZero) { workers("ZeroStage3Worker.GptMatchesStageZero", 2); }
TEST(ZeroStage3, NvmeOffloadTwoRanksMatchesInMemory) {
  workers("ZeroStage3Worker.NvmeOffloadMatchesInMemory", 2, {{"XTRAIN_ZERO_NVME", testing::temp_dir("zero3_nvme")}});
}

TEST(ZeroStage3, CheckpointFromTwoRanksResumesAtOneTwoAndFour) {
  const auto dir = testing::temp_dir("zero3_ckpt");
  workers("ZeroStage3Worker.CheckpointReshards", 2, {{"XTRAIN_ZERO_CKPT", dir}, {"XTRAIN_ZERO_PHASE", "save"}});
  for (int world : {1, 2, 4}) {
    workers("ZeroStage3Worker.CheckpointReshards", world, {{"XTRAIN_ZERO_CKPT", dir}, {"XTRAIN_ZERO_PHASE", "resume"}});
  }
}

}  // namespace
}  // namespace xtrain::zero_stage3_test
