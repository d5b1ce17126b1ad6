// `xtrain tune` end to end with the fake trainer as --trial-command: exit codes (0 done, 1 the
// study stopped on failures, 2 a usage error), the files a study leaves, and the PNG plot; for
// architecture search, --objective2 params against the GPT's closed-form parameter count (with
// xtrain.model.args.mlp_ratio and a conditional key), and a real `xtrain train` stopping at its
// training-time budget. Skips when the xtrain binary in the build folder is missing or has no
// `tune` command yet.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/file_io.h"
#include "xtrain/tune/study_store.h"

namespace xtrain::tune::cli_test {
namespace {
namespace fs = std::filesystem;

bool have_tune_command() {
  if (!fs::exists(testing::xtrain_binary())) return false;
  return testing::run_command(testing::xtrain_binary() + " tune --help") == 0;
}

struct CliStudy {
  std::string dir, space, config;
};

CliStudy make_inputs(const std::string& tag) {
  CliStudy s;
  s.dir = testing::temp_dir(tag);
  s.space = s.dir + "/space.json";
  s.config = s.dir + "/base.json";
  std::ofstream(s.space) << R"({"optimizer.params.lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}})";
  std::ofstream(s.config) << R"({"gradient_clipping": 1.0})";
  return s;
}

std::string tune_command(const CliStudy& s, const std::string& extra) {
  return testing::xtrain_binary() + " tune --config " + s.config + " --space " + s.space + " --study " + s.dir +
         "/study --trial-command '/bin/sh " + testing::source_dir() + "/tests/tune/fake_trainer.sh' " + extra;
}

TEST(TuneCli, RunsAStudyAndWritesItsFiles) {
  if (!have_tune_command()) GTEST_SKIP() << "no `xtrain tune` in " << testing::xtrain_binary();
  const auto s = make_inputs("tune-cli");
  std::string out;
  const int rc = testing::run_command(tune_command(s, "--trials 4 --parallel 2 --sampler random --seed 3"), &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("best val_loss: trial"), std::string::npos) << out;
  for (const char* f :
       {"study.json", "best_config.json", "best_params.json", "convergence.jsonl", "metrics.jsonl", "trials/0003.json"})
    EXPECT_TRUE(fs::exists(s.dir + "/study/" + f)) << f;
  const auto png = read_file(s.dir + "/study/convergence.png");
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // The base config's own keys survive into best_config.json next to the tuned one.
  const auto best = nlohmann::json::parse(read_file(s.dir + "/study/best_config.json"));
  EXPECT_EQ(best["gradient_clipping"], 1.0);
}

TEST(TuneCli, ExitCodes) {
  if (!have_tune_command()) GTEST_SKIP() << "no `xtrain tune` in " << testing::xtrain_binary();
  const auto s = make_inputs("tune-cli-codes");
  std::string out;
  EXPECT_EQ(testing::run_command("FAKE_CRASH_ABOVE=0 " + tune_command(s, "--trials 5 --max-failures 2"), &out), 1)
      << out;
  EXPECT_NE(out.find("2 trials in a row failed"), std::string::npos) << out;
  std::ofstream(s.space) << R"({"optimizer.params.lr": {"type": "logunifrom", "low": 1e-4, "high": 1e-1}})";
  EXPECT_EQ(testing::run_command(tune_command(s, "--trials 1"), &out), 2) << out;
  EXPECT_NE(out.find("did you mean 'loguniform'"), std::string::npos) << out;
}

// A byte-level GPT (V = 256, tied head, biases) with L layers, width C, MLP ratio r, context T.
int64_t gpt_parameters(int64_t L, int64_t C, int64_t r, int64_t T = 256) {
  const int64_t per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (r * C * C + r * C) + (r * C * C + C);
  return 256 * C + T * C + L * per_block + 2 * C;
}

TEST(TuneCli, ObjectiveParamsIsTheModelsParameterCount) {
  if (!have_tune_command()) GTEST_SKIP() << "no `xtrain tune` in " << testing::xtrain_binary();
  auto s = make_inputs("tune-cli-params");
  std::ofstream(s.space) << R"({"xtrain.model.layers": {"type": "int", "low": 1, "high": 3},
    "xtrain.model.d_model": {"type": "int", "low": 32, "high": 96, "step": 32},
    "xtrain.model.args.mlp_ratio": {"type": "int", "low": 1, "high": 4},
    "xtrain.model.attention.type": {"type": "choice", "values": ["dense", "multiscale"]},
    "xtrain.model.attention.windows": {"type": "choice", "values": [[4, 8], [8]],
                                       "when": {"xtrain.model.attention.type": "multiscale"}},
    "$constraints": [["xtrain.model.d_model", "multiple_of", "xtrain.model.heads"]]})";
  std::string out;
  // heads is not a parameter of this space: the constraint names it.
  ASSERT_EQ(testing::run_command(tune_command(s, "--trials 1"), &out), 2) << out;
  EXPECT_NE(out.find("\"xtrain.model.heads\" is not a parameter of the space"), std::string::npos) << out;
  std::ofstream(s.space) << R"({"xtrain.model.layers": {"type": "int", "low": 1, "high": 3},
    "xtrain.model.d_model": {"type": "int", "low": 32, "high": 96, "step": 32},
    "xtrain.model.args.mlp_ratio": {"type": "int", "low": 1, "high": 4},
    "xtrain.model.attention.type": {"type": "choice", "values": ["dense", "multiscale"]},
    "xtrain.model.attention.windows": {"type": "choice", "values": [[4, 8], [8]],
                                       "when": {"xtrain.model.attention.type": "multiscale"}}})";
  const int rc = testing::run_command(
      tune_command(s, "--trials 5 --sampler random --seed 2 --objective2 params --set xtrain.model.heads=2"), &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Pareto front"), std::string::npos) << out;
  for (int64_t id = 0; id < 5; ++id) {
    const auto t = nlohmann::json::parse(read_file(s.dir + "/study/trials/" + trial_name(id) + ".json"));
    const auto& p = t["params"];
    EXPECT_EQ(p.contains("xtrain.model.attention.windows"), p["xtrain.model.attention.type"] == "multiscale") << p;
    const int64_t expected = gpt_parameters(p["xtrain.model.layers"].get<int64_t>(),
                                            p["xtrain.model.d_model"].get<int64_t>(),
                                            p["xtrain.model.args.mlp_ratio"].get<int64_t>());
    EXPECT_EQ(t["objective2"].get<double>(), static_cast<double>(expected)) << p;
  }
  const auto front = nlohmann::json::parse(read_file(s.dir + "/study/pareto.json"));
  EXPECT_FALSE(front["front"].empty());
  EXPECT_EQ(read_file(s.dir + "/study/pareto.png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

// --objective2 latency is the measured forward time: trials of a GPT with ~800x the FLOPs per token
// of another (4 layers 512 wide against 16 wide) must measure far slower; every value is a positive time.
TEST(TuneCli, ObjectiveLatencyFollowsTheModelsWork) {
  if (!have_tune_command()) GTEST_SKIP() << "no `xtrain tune` in " << testing::xtrain_binary();
  auto s = make_inputs("tune-cli-latency");
  std::ofstream(s.space) << R"({"xtrain.model.d_model": {"type": "choice", "values": [16, 512]}})";
  std::string out;
  const int rc = testing::run_command(
      tune_command(s, "--trials 4 --sampler random --seed 5 --objective2 latency --latency-batch 2"
                      " --set xtrain.model.heads=2 --set xtrain.model.seq_len=64 --set xtrain.model.layers=4"),
      &out);
  ASSERT_EQ(rc, 0) << out;
  double small_max = 0, large_min = 1e30;
  for (int64_t id = 0; id < 4; ++id) {
    const auto t = nlohmann::json::parse(read_file(s.dir + "/study/trials/" + trial_name(id) + ".json"));
    const double ms = t["objective2"].get<double>();
    EXPECT_GT(ms, 0.0) << t;
    if (t["params"]["xtrain.model.d_model"] == 16) small_max = std::max(small_max, ms);
    else large_min = std::min(large_min, ms);
  }
  ASSERT_GT(small_max, 0.0) << "seed 5 drew no d_model 16 trial";
  ASSERT_LT(large_min, 1e30) << "seed 5 drew no d_model 512 trial";
  // ~800x the FLOPs: even a 10x load swing between trials keeps the order by a wide margin.
  EXPECT_GT(large_min, 10 * small_max) << "slowest small " << small_max << " ms, fastest large " << large_min << " ms";
}

// A real training run with XTRAIN_TRAIN_SECONDS stops long before xtrain.steps and evaluates at
// the step it reached.
TEST(TuneCli, TrainStopsAtItsTrainingTimeBudget) {
  if (!have_tune_command()) GTEST_SKIP() << "no `xtrain tune` in " << testing::xtrain_binary();
  const auto dir = testing::temp_dir("tune-cli-seconds");
  std::string out;
  const int rc = testing::run_command(
      "XTRAIN_TRAIN_SECONDS=0.5 " + testing::xtrain_binary() +
          " train --set xtrain.steps=1000000 --set xtrain.model.layers=1 --set xtrain.model.d_model=32"
          " --set xtrain.model.heads=2 --set xtrain.model.seq_len=32 --set xtrain.model.args.mlp_ratio=2"
          " --set train_micro_batch_size_per_gpu=2 --set xtrain.eval_interval=0 --set xtrain.eval_batches=1"
          " --set xtrain.save_interval=-1 --set xtrain.generate.tokens=0 --set steps_per_print=1 --output " +
          dir + "/run",
      &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("XTRAIN_TRAIN_SECONDS: 0.5 s of training reached after"), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(gpt_parameters(1, 32, 2, 32)) + " parameters"), std::string::npos) << out;
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  int64_t eval_step = -1;
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val/loss")) eval_step = j["step"].get<int64_t>();
  }
  EXPECT_GT(eval_step, 0);
  EXPECT_LT(eval_step, 1000000);
}

}  // namespace
}  // namespace xtrain::tune::cli_test
