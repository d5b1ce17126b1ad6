// Keys whose effect only the run shows, each checked so that dropping the key fails the test:
// the training loop's (run directory, logging and evaluation intervals, evaluation size) and the
// ZeRO combinations check_run_config refuses (stage, zero_allow_untested_optimizer).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/run/run_checks.h"
#include "xtrain/run/train.h"

namespace xtrain::run_keys_test {
namespace {
namespace fs = std::filesystem;

// The steps at which metrics.jsonl has a record holding `field`.
std::set<int64_t> steps_with(const std::string& metrics, const std::string& field) {
  std::set<int64_t> steps;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains(field)) steps.insert(j["step"].get<int64_t>());
  }
  return steps;
}

TrainRequest tiny(const std::string& dir, const std::string& corpus, std::vector<std::string> more) {
  TrainRequest r;
  r.overrides = {"xtrain.data.path=" + corpus, "xtrain.model.layers=1", "xtrain.model.d_model=32",
                 "xtrain.model.heads=2", "xtrain.model.seq_len=16", "train_micro_batch_size_per_gpu=4",
                 "gradient_accumulation_steps=1", "xtrain.steps=6", "xtrain.save_interval=-1",
                 "xtrain.generate.tokens=0", "xtrain.data.prefetch=1", "xtrain.threads=1",
                 "xtrain.output=" + dir + "/out", "xtrain.monitor.peak_tflops=1"};
  r.overrides.insert(r.overrides.end(), more.begin(), more.end());
  return r;
}

TEST(RunKeys, TrainingLoopKeysShapeTheRun) {
  const std::string dir = testing::temp_dir("run-keys");
  const std::string corpus = testing::write_corpus(dir, 400, 17);
  // xtrain.output / xtrain.name: the run directory; steps_per_print: metrics every 3 steps (and the
  // last); eval_interval 2: validation at 2 and 4 (and the final one at 6); eval_batches 3.
  const auto a = train(tiny(dir, corpus, {"xtrain.name=first", "steps_per_print=3", "xtrain.log_interval=0",
                                          "xtrain.eval_interval=2", "xtrain.eval_batches=3"}));
  EXPECT_EQ(fs::path(a.run_dir), fs::path(dir + "/out/first"));
  EXPECT_EQ(steps_with(a.run_dir + "/metrics.jsonl", "train/loss"), (std::set<int64_t>{3, 6}));
  EXPECT_EQ(steps_with(a.run_dir + "/metrics.jsonl", "val/loss"), (std::set<int64_t>{2, 4, 6}));
  EXPECT_EQ(a.final_eval.batches, 3);
  // xtrain.log_interval wins over steps_per_print; eval_interval 0: only the final validation.
  const auto b = train(tiny(dir, corpus, {"xtrain.name=second", "steps_per_print=3", "xtrain.log_interval=2",
                                          "xtrain.eval_interval=0", "xtrain.eval_batches=1"}));
  EXPECT_EQ(fs::path(b.run_dir), fs::path(dir + "/out/second"));
  EXPECT_EQ(steps_with(b.run_dir + "/metrics.jsonl", "train/loss"), (std::set<int64_t>{2, 4, 6}));
  EXPECT_EQ(steps_with(b.run_dir + "/metrics.jsonl", "val/loss"), (std::set<int64_t>{6}));
  EXPECT_EQ(b.final_eval.batches, 1);
}

std::string run_check_error(const std::string& text) {
  try {
    check_run_config(config::load_text(text, config::LoadOptions{}).config);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(RunKeys, ZeroChecksFollowStageAndUntestedOptimizer) {
  EXPECT_NE(run_check_error(R"({"optimizer": {"type": "SGD"}, "zero_optimization": {"stage": 1}})")
                .find("is not tested with ZeRO"),
            std::string::npos);
  EXPECT_EQ(run_check_error(R"({"optimizer": {"type": "SGD"}, "zero_optimization": {"stage": 1},
                                "zero_allow_untested_optimizer": true})"),
            "");
  EXPECT_NE(run_check_error(R"({"optimizer": {"type": "Lamb"}, "zero_optimization": {"stage": 2}})")
                .find("optimizer Lamb is not supported with zero_optimization.stage 2"),
            std::string::npos);
  EXPECT_EQ(run_check_error(R"({"optimizer": {"type": "Lamb"}, "zero_optimization": {"stage": 0}})"), "");
}

}  // namespace
}  // namespace xtrain::run_keys_test
