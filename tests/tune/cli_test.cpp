// `xtrain tune` end to end with the fake trainer as --trial-command: exit codes (0 done, 1 the
// study stopped on failures, 2 a usage error), the files a study leaves, and the PNG plot. Skips
// when the xtrain binary in the build folder is missing or has no `tune` command yet.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/file_io.h"
#include "xtrain/tune/study_store.h"

namespace xtrain::tune {
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

}  // namespace
}  // namespace xtrain::tune
