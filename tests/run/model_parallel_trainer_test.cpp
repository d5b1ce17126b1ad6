// `xtrain train` with tensor and pipeline parallelism (tensor_parallel.size, pipeline.stages) on
// several ranks over Gloo, against one process training the whole GPT: the logged loss and gradient
// norm of every step (clipping active, so the norm across the model-parallel group matters) and the
// final weights merged from the sharded checkpoint. TP 2 and 4, PP 2 and 4, DP x PP x TP = 2 x 2 x 2,
// with 1F1B and GPipe. Also: exact resume of a TP x PP run, resuming with other sizes refused, and
// `xtrain ckpt consolidate`'s merged checkpoint (weights and optimizer state) continuing as a
// one-rank run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <ATen/Functions.h>
#include <torch/nn/module.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/run/checkpoint_merge.h"
#include "xtrain/run/train.h"

namespace xtrain::model_parallel_trainer_test {
namespace {
namespace fs = std::filesystem;

// 4 heads and 256 byte tokens: TP 2 and 4 divide heads, 4·d_model and the vocabulary; 4 layers for
// 4 stages; 4 micro-batches per step so 1F1B reaches its steady state. fp32 (the default recipe is
// bf16): the layouts are compared with the one-rank run to fp32 rounding.
std::vector<std::string> base_overrides(const std::string& corpus, int64_t steps) {
  return {"bf16.enabled=false", "xtrain.data.path=" + corpus, "xtrain.model.layers=4", "xtrain.model.d_model=32",
          "xtrain.model.heads=4", "xtrain.model.seq_len=16", "xtrain.model.dropout=0",
          "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=4", "gradient_clipping=0.5",
          "optimizer.type=AdamW", "optimizer.params.lr=0.003", "optimizer.params.weight_decay=0.1",
          "scheduler.params.warmup_num_steps=0", "scheduler.params.cos_min_ratio=1",  // a constant lr
          "scheduler.params.total_num_steps=100",
          "xtrain.steps=" + std::to_string(steps), "xtrain.eval_interval=0", "xtrain.eval_batches=2",
          "xtrain.save_interval=2", "xtrain.keep_checkpoints=0", "xtrain.generate.tokens=0",
          "xtrain.data.prefetch=1", "xtrain.log_interval=1", "xtrain.threads=1"};
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ";") + s;
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ';');) out.push_back(item);
  return out;
}

TEST(ModelParallelTrainerWorker, Train) {
  XTRAIN_WORKER_ONLY();
  TrainRequest r;
  r.output = testing::worker_env("MP_OUTPUT");
  r.overrides = split(testing::worker_env("MP_OVERRIDES"));
  r.resume = testing::worker_env("MP_RESUME") == "1";
  train(r);
}

void train_ranks(int world, const std::vector<std::string>& overrides, const std::string& output, bool resume = false) {
  testing::WorkerOptions o;
  o.world_size = world;
  o.timeout_s = 240;
  o.env = {{"MP_OUTPUT", output}, {"MP_OVERRIDES", join(overrides)}, {"MP_RESUME", resume ? "1" : "0"}};
  testing::expect_workers_ok(testing::run_workers("ModelParallelTrainerWorker.Train", o));
}

struct Curve {
  std::map<int64_t, double> loss, grad_norm;
  double val_loss = NAN;  // the final evaluation (through the pipeline / gathered logits)
};

Curve read_curve(const std::string& run_dir) {
  Curve c;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val/loss")) c.val_loss = j["val/loss"].get<double>();
    if (!j.contains("train/loss")) continue;
    c.loss[j["step"].get<int64_t>()] = j["train/loss"].get<double>();
    c.grad_norm[j["step"].get<int64_t>()] = j["train/grad_norm"].get<double>();
  }
  return c;
}

std::map<std::string, at::Tensor> weights_of(const std::string& run_dir) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : load_trained_run(run_dir).model.module->named_parameters()) out[p.key()] = p.value().detach();
  return out;
}

// fp32: the tensor-parallel ranks sum the same products in another order (split GEMMs, all-reduced
// partial sums), ~1e-7 relative per step; after 4 AdamW steps the weights (|w| < 1) agree to ~1e-6.
// A missing all-reduce, a wrongly weighted norm (LayerNorms counted tp times) or a misplaced shard
// moves them by > 1e-3.
// `same_eval`: the validation micro-batches are the reference's (the same micro-batch size).
void expect_same_training(const std::string& run_dir, const std::string& reference, const std::string& what,
                          bool same_eval = true) {
  const Curve got = read_curve(run_dir), ref = read_curve(reference);
  ASSERT_EQ(got.loss.size(), ref.loss.size()) << what;
  for (const auto& [step, loss] : ref.loss) {
    EXPECT_NEAR(got.loss.at(step), loss, 1e-5 * std::abs(loss)) << what << " step " << step;
    EXPECT_NEAR(got.grad_norm.at(step), ref.grad_norm.at(step), 1e-4 * ref.grad_norm.at(step)) << what << " step " << step;
  }
  if (same_eval) EXPECT_NEAR(got.val_loss, ref.val_loss, 1e-5 * std::abs(ref.val_loss)) << what << " validation";
  const auto a = weights_of(run_dir), b = weights_of(reference);
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, w] : b) {
    ASSERT_TRUE(a.count(name)) << what << ": " << name;
    EXPECT_LT((a.at(name) - w).abs().max().item<double>(), 2e-5) << what << ": " << name;
  }
}

// The one-rank reference runs: the global batch of one data-parallel rank, and of two (micro-batches
// twice as large: the same samples, as the sampler deals them out round-robin).
struct Reference {
  std::string dir, corpus, one, one_dp2;
};

Reference reference_runs(const std::string& tag, bool with_dp2) {
  Reference r;
  r.dir = testing::temp_dir(tag);
  r.corpus = testing::write_corpus(r.dir, 300, 13);
  TrainRequest one;
  one.output = r.one = r.dir + "/one";
  one.overrides = base_overrides(r.corpus, 4);
  train(one);
  // Clipping is active (the norm enters every update).
  for (const auto& [step, norm] : read_curve(one.output).grad_norm) EXPECT_GT(norm, 0.5) << "step " << step;
  if (with_dp2) {
    TrainRequest two = one;
    two.output = r.one_dp2 = r.dir + "/one_dp2";
    two.overrides.push_back("train_micro_batch_size_per_gpu=4");
    train(two);
  }
  return r;
}

std::vector<std::string> with(const Reference& r, const std::vector<std::string>& extra) {
  auto o = base_overrides(r.corpus, 4);
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

TEST(ModelParallelTrainer, TensorParallelTwoAndFourTrainLikeOneRank) {
  const auto r = reference_runs("mp-tp", /*with_dp2=*/true);
  train_ranks(2, with(r, {"tensor_parallel.size=2"}), r.dir + "/tp2");
  expect_same_training(r.dir + "/tp2", r.one, "tp 2");
  // With activation checkpointing: the recompute repeats the blocks' collectives.
  train_ranks(4, with(r, {"tensor_parallel.size=4", "activation_checkpointing.enabled=true"}), r.dir + "/tp4");
  expect_same_training(r.dir + "/tp4", r.one, "tp 4, activation checkpointing");
  // dp 2 x tp 2 with ZeRO stage 1 (the data-parallel dimension partitions the optimizer state).
  train_ranks(4, with(r, {"tensor_parallel.size=2", "zero_optimization.stage=1"}), r.dir + "/dp2tp2");
  expect_same_training(r.dir + "/dp2tp2", r.one_dp2, "dp 2 x tp 2, ZeRO-1", false);
  // The checkpoint records the grid and every rank's part.
  checkpoint::CheckpointReader reader(r.dir + "/dp2tp2/checkpoints");
  const auto mp = nlohmann::json::parse(reader.read_text("model_parallel.json"));
  EXPECT_EQ(mp["tensor_parallel"], 2);
  EXPECT_EQ(mp["data_parallel"], 2);
  EXPECT_TRUE(reader.has_file("mp_rank_00_000_engine.json"));
  EXPECT_TRUE(reader.has_file("mp_rank_01_000_zero_rank_1.pt"));
}

TEST(ModelParallelTrainer, PipelineTwoAndFourStagesTrainLikeOneRank) {
  const auto r = reference_runs("mp-pp", /*with_dp2=*/false);
  train_ranks(2, with(r, {"pipeline.stages=2", "pipeline.schedule=1f1b"}), r.dir + "/pp2");
  expect_same_training(r.dir + "/pp2", r.one, "pp 2, 1F1B");
  train_ranks(4, with(r, {"pipeline.stages=4", "pipeline.schedule=gpipe", "pipeline.partition=uniform"}),
              r.dir + "/pp4");
  expect_same_training(r.dir + "/pp4", r.one, "pp 4, GPipe");
  // The tied embedding is on the first and the last stage, equal after training.
  checkpoint::CheckpointReader reader(r.dir + "/pp4/checkpoints");
  EXPECT_TRUE(reader.has_file("mp_rank_00_003_model.pt"));
}

TEST(ModelParallelTrainer, DataPipelineTensorTwoByTwoByTwoTrainsLikeOneRank) {
  const auto r = reference_runs("mp-3d", /*with_dp2=*/true);
  for (const std::string schedule : {"1f1b", "gpipe"}) {
    const std::string out = r.dir + "/3d_" + schedule;
    // With the end-of-run text sample (every rank takes part in its forwards) and, for GPipe, which
    // holds every micro-batch's activations, activation checkpointing.
    train_ranks(8, with(r, {"tensor_parallel.size=2", "pipeline.stages=2", "pipeline.schedule=" + schedule,
                            "zero_optimization.stage=1", "xtrain.generate.tokens=8",
                            std::string("activation_checkpointing.enabled=") + (schedule == "gpipe" ? "true" : "false")}),
                out);
    expect_same_training(out, r.one_dp2, "dp 2 x pp 2 x tp 2, " + schedule, false);
  }
}

TEST(ModelParallelTrainer, ResumeAndConsolidate) {
  const std::string dir = testing::temp_dir("mp-resume");
  const std::string corpus = testing::write_corpus(dir, 300, 13);
  const std::vector<std::string> grid = {"tensor_parallel.size=2", "pipeline.stages=2"};
  auto full = base_overrides(corpus, 4), half = base_overrides(corpus, 2);
  full.insert(full.end(), grid.begin(), grid.end());
  half.insert(half.end(), grid.begin(), grid.end());
  train_ranks(4, full, dir + "/straight");
  train_ranks(4, half, dir + "/split");
  train_ranks(4, full, dir + "/split", /*resume=*/true);
  const auto a = weights_of(dir + "/straight"), b = weights_of(dir + "/split");
  for (const auto& [name, w] : a) EXPECT_TRUE(w.equal(b.at(name))) << "resumed TP x PP run differs in " << name;

  // Another tensor-parallel size cannot resume the sharded checkpoint; it says what to do.
  TrainRequest wrong;
  wrong.output = dir + "/split";
  wrong.overrides = base_overrides(corpus, 6);
  wrong.overrides.push_back("tensor_parallel.size=1");
  wrong.overrides.push_back("pipeline.stages=1");
  wrong.resume = true;
  try {
    train(wrong);
    ADD_FAILURE() << "resuming a tp 2 x pp 2 checkpoint on one rank was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain ckpt consolidate"), std::string::npos) << e.what();
  }

  // Merged at step 2 (weights and optimizer state), a one-rank run continues where TP x PP left off.
  const std::string merged_run = dir + "/merged";
  fs::create_directories(merged_run);
  checkpoint::CheckpointReader step2(dir + "/straight/checkpoints", "global_step2");
  write_merged_checkpoint(step2, merged_run + "/checkpoints");
  fs::copy_file(dir + "/straight/config.json", merged_run + "/config.json");
  TrainRequest cont;
  cont.output = merged_run;
  cont.overrides = base_overrides(corpus, 4);
  cont.overrides.push_back("tensor_parallel.size=1");
  cont.overrides.push_back("pipeline.stages=1");
  cont.resume = true;
  train(cont);
  const auto c = weights_of(merged_run);
  for (const auto& [name, w] : a) {
    EXPECT_LT((c.at(name) - w).abs().max().item<double>(), 2e-5) << "merged-and-continued run differs in " << name;
  }
}

}  // namespace
}  // namespace xtrain::model_parallel_trainer_test
