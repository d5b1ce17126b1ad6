// `xtrain config` runs every check `xtrain train` runs before any work: files that `train` used to
// reject only after building data, model and engine now fail `config` too, with the same message.
#include <gtest/gtest.h>

#include <fstream>

#include "support/paths.h"

namespace xtrain::config_command_test {
namespace {

int xtrain(const std::string& args, std::string* out) {
  return testing::run_command(testing::xtrain_binary() + " " + args, out);
}

TEST(ConfigCommand, RejectsWhatTrainRejectsWithTheSameMessage) {
  struct Case { const char* json; const char* message; };
  const Case cases[] = {
      {R"({"zero_optimization": {"stage": 1}, "optimizer": {"type": "Lamb"}})",
       "zero: optimizer Lamb is not supported with zero_optimization.stage 1"},
      {R"({"xtrain": {"model": {"type": "mlp"}}})", "xtrain.model.type \"mlp\" cannot train on text data"},
      {R"({"fp16": {"enabled": true, "auto_cast": true}})", "on CPU use \"bf16\": {\"enabled\": true} instead of fp16"},
      {R"({"fp16": {"enabled": true}})", "fp16 compute needs CUDA"},
      {R"({"xtrain": {"loss": {"type": "focal", "label_smoothing": 0.1}}})",
       "xtrain.loss.label_smoothing applies to cross_entropy only"},
      {R"({"xtrain": {"monitor": {"flush_secs": 0}}})", "monitor: flush_secs must be > 0"},
      {R"({"curriculum_learning": {"enabled": true, "max_difficulty": 4096}})",
       "curriculum_learning.max_difficulty (4096) must be <= xtrain.model.seq_len (256)"},
      {R"({"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01,
          "cycle_first_step_size": 0}}})", "cycle_first_step_size must be > 0"},
  };
  const std::string dir = testing::temp_dir("config_command");
  int n = 0;
  for (const auto& c : cases) {
    const std::string file = dir + "/case" + std::to_string(n++) + ".json";
    std::ofstream(file) << c.json;
    std::string config_out, train_out;
    EXPECT_EQ(xtrain("config -c " + file, &config_out), 2) << c.json << "\n" << config_out;
    EXPECT_NE(config_out.find(c.message), std::string::npos) << c.json << "\n" << config_out;
    EXPECT_EQ(xtrain("train -c " + file + " --output " + dir + "/run" + std::to_string(n), &train_out), 2) << train_out;
    EXPECT_NE(train_out.find(c.message), std::string::npos) << c.json << "\n" << train_out;
  }
}

TEST(ConfigCommand, FpSixteenAutoCastOnCpuNamesTheKeyAndWhatWorks) {
  const std::string dir = testing::temp_dir("config_command");
  std::ofstream(dir + "/f.json") << R"({"fp16": {"enabled": true, "auto_cast": true}, "amp": {"dtype": "bf16"}})";
  std::string out;
  EXPECT_EQ(xtrain("config -c " + dir + "/f.json", &out), 2);
  EXPECT_NE(out.find("(fp16.auto_cast)"), std::string::npos) << out;
  EXPECT_NE(out.find("\"bf16\": {\"enabled\": true}"), std::string::npos) << out;
  EXPECT_EQ(out.find("use amp.dtype"), std::string::npos) << "amp.dtype cannot override fp16.auto_cast: " << out;
}

TEST(ConfigCommand, ReportsEveryLateErrorAtOnceAndPassesTheDefaults) {
  const std::string dir = testing::temp_dir("config_command");
  std::ofstream(dir + "/two.json") << R"({"xtrain": {"model": {"type": "mlp"}, "monitor": {"flush_secs": 0}}})";
  std::string out;
  EXPECT_EQ(xtrain("config -c " + dir + "/two.json", &out), 2);
  EXPECT_NE(out.find("2 errors"), std::string::npos) << out;
  EXPECT_NE(out.find("cannot train on text data"), std::string::npos) << out;
  EXPECT_NE(out.find("flush_secs must be > 0"), std::string::npos) << out;
  EXPECT_EQ(xtrain("config", &out), 0) << out;
  EXPECT_EQ(xtrain("config -c " + testing::source_dir() + "/configs/default.json", &out), 0) << out;
}

}  // namespace
}  // namespace xtrain::config_command_test
