// The study loop with a fake trainer (tests/tune/fake_trainer.sh) as the trial command: outputs
// and values against the fake's closed form, reproducible proposals, crashing trials recorded and
// never re-run, the failure limit, pruning, config checks of the space's keys, and resume after
// the study process is killed with SIGKILL mid-study.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/tune/study_store.h"
#include "xtrain/tune/tuner.h"

namespace xtrain::tune::study_test {
namespace {
namespace fs = std::filesystem;

const char* kSpace = R"({"optimizer.params.lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1},
                         "xtrain.model.dropout": {"type": "uniform", "low": 0.0, "high": 0.3}})";

// The fake trainer's final val/loss (last report at step 40), computed here independently.
double fake_final(const Params& p) {
  const double lr = p["optimizer.params.lr"].get<double>(), d = p["xtrain.model.dropout"].get<double>();
  return std::pow(std::log10(lr) + 2.5, 2) + 10 * std::pow(d - 0.1, 2) + 1 + 4.0 / 40;
}

TuneOptions fake_options(const std::string& dir, std::vector<std::pair<std::string, std::string>> env = {}) {
  TuneOptions o;
  o.study_dir = dir;
  o.trials = 6;
  o.parallel = 3;
  o.sampler = "random";
  o.seed = 42;
  o.poll_seconds = 0.02;
  o.kill_grace_seconds = 2.0;
  o.print = false;
  o.base_config_text = "{}";
  const std::string script = testing::source_dir() + "/tests/tune/fake_trainer.sh";
  o.command = [script, env](const TrialLaunch& l) {
    Command c;
    c.argv = {"/bin/sh", script};
    if (!l.base_config_path.empty()) c.argv.insert(c.argv.end(), {"--config", l.base_config_path});
    for (const auto& s : l.overrides) c.argv.insert(c.argv.end(), {"--set", s});
    c.argv.insert(c.argv.end(), {"--output", l.run_dir});
    c.env = env;
    return c;
  };
  return o;
}

std::string usage_error(const SearchSpace& space, const TuneOptions& o) {
  try {
    run_study(space, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Study, RunsTrialsAndWritesOutputs) {
  const auto dir = testing::temp_dir("tune-run");
  const auto space = SearchSpace::parse(kSpace);
  const auto r = run_study(space, fake_options(dir));
  ASSERT_EQ(r.trials.size(), 6u);
  int64_t best = -1;
  for (const auto& t : r.trials) {
    EXPECT_EQ(t.state, TrialState::kComplete) << t.error;
    ASSERT_TRUE(t.value.has_value());
    // awk and C++ evaluate the same formula; %.17g keeps every bit, log10 may differ by an ulp.
    EXPECT_NEAR(*t.value, fake_final(t.params), 1e-12) << "trial " << t.id;
    EXPECT_EQ(t.intermediate.size(), 4u) << "val/loss only, not train/loss";
    EXPECT_TRUE(fs::exists(dir + "/trials/" + trial_name(t.id) + ".json"));
    if (best < 0 || *t.value < *r.trials[best].value) best = t.id;
  }
  EXPECT_EQ(r.best_id, best);
  for (const char* f :
       {"study.json", "base_config.json", "best_params.json", "best_config.json", "convergence.jsonl", "metrics.jsonl"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  const auto best_params = nlohmann::json::parse(read_file(dir + "/best_params.json"));
  EXPECT_EQ(best_params["trial"], best);
  // best_config.json is the resolved config with the best overrides applied.
  const auto best_config = nlohmann::json::parse(read_file(dir + "/best_config.json"));
  EXPECT_DOUBLE_EQ(best_config["optimizer"]["params"]["lr"].get<double>(),
                   r.trials[best].params["optimizer.params.lr"].get<double>());
  std::ifstream conv(dir + "/convergence.jsonl");
  std::string line;
  double prev = INFINITY;
  int lines = 0;
  while (std::getline(conv, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_LE(j["best"].get<double>(), prev);
    prev = j["best"].get<double>();
    ++lines;
  }
  EXPECT_EQ(lines, 6);
  EXPECT_DOUBLE_EQ(prev, *r.trials[best].value);
  // metrics.jsonl (for the dashboard): one line per finished trial, in the trainer's format.
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::vector<nlohmann::json> rows;
  while (std::getline(metrics, line)) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows.back()["step"], 6);
  EXPECT_DOUBLE_EQ(rows.back()["tune/best"].get<double>(), *r.trials[best].value);
}

TEST(Study, SameSeedGivesSameProposals) {
  const auto space = SearchSpace::parse(kSpace);
  auto run = [&](uint64_t seed) {
    auto o = fake_options(testing::temp_dir("tune-seed"));
    o.sampler = "gp";
    o.parallel = 1;
    o.trials = 8;  // 5 random, then 3 from the GP
    o.seed = seed;
    std::vector<Params> params;
    for (const auto& t : run_study(space, o).trials) params.push_back(t.params);
    return params;
  };
  const auto a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Study, CrashingTrialsAreRecordedAndNeverRerun) {
  const auto dir = testing::temp_dir("tune-crash");
  const auto space = SearchSpace::parse(kSpace);
  auto o = fake_options(dir, {{"FAKE_CRASH_ABOVE", "0.003"}});
  o.max_failures = 100;
  const auto first = run_study(space, o);
  int failed = 0;
  for (const auto& t : first.trials) {
    const bool should_crash = t.params["optimizer.params.lr"].get<double>() > 0.003;
    EXPECT_EQ(t.state == TrialState::kFailed, should_crash) << "trial " << t.id;
    if (!should_crash) continue;
    ++failed;
    EXPECT_NE(t.error.find("exit code 3"), std::string::npos) << t.error;
    EXPECT_NE(t.error.find("RuntimeError: the loss is nan at step 3"), std::string::npos) << t.error;
  }
  ASSERT_GT(failed, 0) << "seed 42 draws some lr above 0.003";
  o.trials = 8;  // resume and extend: failed trials stay as they were
  const auto second = run_study(space, o);
  ASSERT_EQ(second.trials.size(), 8u);
  for (size_t i = 0; i < first.trials.size(); ++i) {
    EXPECT_EQ(second.trials[i].state, first.trials[i].state);
    EXPECT_EQ(second.trials[i].attempt, 1);
    EXPECT_EQ(second.trials[i].finished, first.trials[i].finished);
  }
}

TEST(Study, StopsAfterConsecutiveFailures) {
  const auto space = SearchSpace::parse(kSpace);
  auto o = fake_options(testing::temp_dir("tune-stop"), {{"FAKE_CRASH_ABOVE", "0"}});
  o.parallel = 1;
  o.max_failures = 3;
  const auto r = run_study(space, o);
  EXPECT_EQ(r.trials.size(), 3u);
  EXPECT_EQ(r.best_id, -1);
  EXPECT_NE(r.stop_reason.find("3 trials in a row failed"), std::string::npos) << r.stop_reason;
  EXPECT_NE(r.stop_reason.find("RuntimeError"), std::string::npos) << r.stop_reason;
}

TEST(Study, ExitWithoutMetricIsAFailure) {
  const auto space = SearchSpace::parse(kSpace);
  auto o = fake_options(testing::temp_dir("tune-nometric"), {{"FAKE_NO_METRIC", "1"}});
  o.trials = 1;
  const auto r = run_study(space, o);
  ASSERT_EQ(r.trials.size(), 1u);
  EXPECT_EQ(r.trials[0].state, TrialState::kFailed);
  EXPECT_NE(r.trials[0].error.find("without reporting val_loss (looked for val_loss or val/loss"), std::string::npos)
      << r.trials[0].error;
}

// Pruning stops the process (the pruned trial reports fewer steps than the curve has).
TEST(Study, AshaStopsTrialsAndRecordsThem) {
  const auto space = SearchSpace::parse(kSpace);
  auto o = fake_options(testing::temp_dir("tune-asha"), {{"FAKE_SLEEP", "0.15"}});
  o.parallel = 1;
  o.pruner = "asha";
  o.pruning.min_resource = 10;
  const auto r = run_study(space, o);
  int pruned = 0;
  double best_rung0 = INFINITY;
  for (const auto& t : r.trials) {
    ASSERT_FALSE(t.intermediate.empty());
    const double rung0 = t.intermediate.front().second;
    if (t.state == TrialState::kPruned) {
      ++pruned;
      EXPECT_NE(t.error.find("asha: at rung 0"), std::string::npos) << t.error;
      EXPECT_LT(t.last_step(), 40) << "the process was stopped before its last report";
      EXPECT_EQ(*t.value, t.intermediate.back().second);
      EXPECT_GT(rung0, best_rung0) << "with < 6 trials only a new best passes rung 0";
    } else {
      EXPECT_EQ(t.state, TrialState::kComplete);
    }
    best_rung0 = std::min(best_rung0, rung0);
  }
  EXPECT_GT(pruned, 0);
}

// Scripted curves per trial; xtrain.steps = 30 is the final step. Trial 1 is the best at step 10
// but not at step 30, ASHA's second rung: it must complete there, not be "pruned" at its last
// report. Trial 2 is stopped at step 10 (worse than the best, 4).
TEST(Study, NeverStopsATrialAtItsFinalStep) {
  const auto space = SearchSpace::parse(kSpace);
  auto o = fake_options(testing::temp_dir("tune-final"));
  o.trials = 3;
  o.parallel = 1;
  o.pruner = "asha";
  o.pruning.min_resource = 10;
  o.base_config_text = R"({"xtrain": {"steps": 30}})";
  const std::vector<std::string> curves = {"10:5 30:3", "10:4 30:3.5", "10:6 30:2"};
  const auto fake = o.command;
  o.command = [fake, curves](const TrialLaunch& l) {
    Command c = fake(l);
    c.env = {{"FAKE_CURVE", curves[static_cast<size_t>(l.id)]}, {"FAKE_SLEEP", "0.3"}, {"FAKE_LINGER", "0.5"}};
    return c;
  };
  const auto r = run_study(space, o);
  ASSERT_EQ(r.trials.size(), 3u);
  EXPECT_EQ(r.trials[0].state, TrialState::kComplete);
  EXPECT_EQ(r.trials[1].state, TrialState::kComplete) << r.trials[1].error;
  EXPECT_EQ(*r.trials[1].value, 3.5);
  EXPECT_EQ(r.trials[2].state, TrialState::kPruned);
  EXPECT_EQ(r.trials[2].last_step(), 10);
  EXPECT_EQ(*r.trials[2].value, 6.0);
}

TEST(Study, SpaceKeysMustBeConfigKeys) {
  auto o = fake_options(testing::temp_dir("tune-keys"));
  auto e = usage_error(SearchSpace::parse(R"({"optimizer.params.lrr": {"type": "uniform", "low": 0, "high": 1}})"), o);
  EXPECT_NE(e.find("did you mean 'optimizer.params.lr'"), std::string::npos) << e;
  o.study_dir = testing::temp_dir("tune-keys2");
  e = usage_error(SearchSpace::parse(R"({"completely.unrelated": {"type": "uniform", "low": 0, "high": 1}})"), o);
  EXPECT_NE(e.find("'completely.unrelated' is not a config key"), std::string::npos) << e;
}

TEST(Study, ResumingWithOtherSettingsIsRefused) {
  const auto dir = testing::temp_dir("tune-settings");
  const auto space = SearchSpace::parse(kSpace);
  auto o = fake_options(dir);
  o.trials = 1;
  run_study(space, o);
  o.metric = "val/accuracy";
  EXPECT_NE(usage_error(space, o).find("was created with metric = \"val_loss\""), std::string::npos);
  o.metric = "val_loss";
  o.base_config_text = R"({"gradient_clipping": 1.0})";
  EXPECT_NE(usage_error(space, o).find("--config differs"), std::string::npos);
}

int count_state(const std::vector<Trial>& trials, TrialState s) {
  int n = 0;
  for (const auto& t : trials) n += t.state == s;
  return n;
}

// A real kill: the study runs in a forked process that gets SIGKILL once two trials completed and
// another one runs; the resumed study keeps the completed ones, re-runs the interrupted ones with
// the same parameters, and ends with the trials an uninterrupted study would have.
TEST(Study, ResumesAfterKill) {
  const auto dir = testing::temp_dir("tune-kill");
  const auto space = SearchSpace::parse(kSpace);
  auto o = fake_options(dir, {{"FAKE_SLEEP", "0.1"}});
  o.parallel = 2;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      run_study(space, o);
    } catch (...) {
    }
    _exit(0);
  }
  for (int i = 0; i < 400 && !fs::exists(dir + "/study.json"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const StudyStore reader(dir, StudySettings{space.to_json(), "val_loss", "min", "random", 42, {}}, "{}");
  std::vector<Trial> seen;
  auto ready = [&] {
    return count_state(seen, TrialState::kComplete) >= 2 && count_state(seen, TrialState::kRunning) >= 1;
  };
  for (int i = 0; i < 400 && !ready(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    seen = reader.load_trials();
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  const auto before = reader.load_trials();
  ASSERT_GE(count_state(before, TrialState::kComplete), 2);
  ASSERT_LT(before.size(), 6u) << "the study finished before the kill; slow the fake trainer down";
  const int interrupted = count_state(before, TrialState::kRunning);
  ASSERT_GE(interrupted, 1);
  const auto after = run_study(space, o);
  ASSERT_EQ(after.trials.size(), 6u);
  int rerun = 0;
  for (const auto& t : after.trials) {
    EXPECT_EQ(t.state, TrialState::kComplete) << t.error;
    EXPECT_NEAR(*t.value, fake_final(t.params), 1e-12);
    for (const auto& b : before) {
      if (b.id != t.id) continue;
      EXPECT_EQ(t.params, b.params) << "trial " << t.id << " keeps its parameters";
      if (b.state == TrialState::kComplete) {
        EXPECT_EQ(t.finished, b.finished) << "completed trials are kept";
      }
      if (b.state == TrialState::kRunning) rerun += t.attempt == 2;
    }
  }
  EXPECT_EQ(rerun, interrupted);
  // The same proposals as a study that was never interrupted (random sampler: seed and trial id).
  auto fresh = fake_options(testing::temp_dir("tune-nokill"));
  const auto reference = run_study(space, fresh);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(after.trials[i].params, reference.trials[i].params) << i;
}

}  // namespace
}  // namespace xtrain::tune::study_test
