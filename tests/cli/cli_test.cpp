// The xtrain program as users call it: help, exit codes (0 done, 2 usage/config error, 1 failure
// while running), and error messages without stack traces.
#include <gtest/gtest.h>

#include <fstream>

#include "support/paths.h"

namespace xtrain::cli_test {
namespace {

int xtrain(const std::string& args, std::string* out) {
  return testing::run_command(testing::xtrain_binary() + " " + args, out);
}

TEST(Cli, HelpExitsZero) {
  std::string out;
  EXPECT_EQ(xtrain("--help", &out), 0);
  for (const char* cmd : {"train", "eval", "generate", "ckpt", "config"}) EXPECT_NE(out.find(cmd), std::string::npos) << cmd;
  EXPECT_EQ(xtrain("train --help", &out), 0);
  EXPECT_NE(out.find("--resume"), std::string::npos);
}

TEST(Cli, UsageAndConfigErrorsExitTwo) {
  std::string out;
  EXPECT_EQ(xtrain("", &out), 2);
  EXPECT_EQ(xtrain("frobnicate", &out), 2);
  EXPECT_EQ(xtrain("train --config /nonexistent.json", &out), 2);
  const std::string dir = testing::temp_dir("cli");
  std::ofstream(dir + "/bad.json") << R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "gradient_cliping": 1})";
  EXPECT_EQ(xtrain("config --config " + dir + "/bad.json", &out), 2);
  EXPECT_NE(out.find("did you mean 'gradient_clipping'"), std::string::npos) << out;
  EXPECT_EQ(out.find("Exception raised from"), std::string::npos) << "no stack traces for user errors: " << out;
  EXPECT_EQ(xtrain("train --set train_batch_size=10 --set train_micro_batch_size_per_gpu=3 --set xtrain.output=" + dir,
                   &out), 2);
  EXPECT_NE(out.find("must equal"), std::string::npos) << out;
  EXPECT_EQ(xtrain("train --set fp16.enabled=true --set xtrain.output=" + dir, &out), 2);
  EXPECT_NE(out.find("bf16"), std::string::npos) << out;
}

TEST(Cli, MissingDatasetSaysWhatToRun) {
  std::string out;
  const std::string dir = testing::temp_dir("cli-data");
  EXPECT_EQ(testing::run_command("XTRAIN_DATA_DIR=" + dir + " " + testing::xtrain_binary() +
                                     " train --set xtrain.output=" + dir,
                                 &out),
            2);
  EXPECT_NE(out.find("scripts/fetch-data"), std::string::npos) << out;
}

TEST(Cli, EvalOfMissingRunExitsTwo) {
  std::string out;
  EXPECT_EQ(xtrain("eval --run /nonexistent-run", &out), 2);
  EXPECT_NE(out.find("no run at"), std::string::npos) << out;
}

TEST(Cli, ConfigDocsMatchCommittedReference) {
  std::string out;
  ASSERT_EQ(xtrain("config --docs", &out), 0);
  std::ifstream in(testing::source_dir() + "/docs/config.md");
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(out, committed.str()) << "docs/config.md is stale: regenerate with `build/xtrain config --docs > docs/config.md`";
}

}  // namespace
}  // namespace xtrain::cli_test
