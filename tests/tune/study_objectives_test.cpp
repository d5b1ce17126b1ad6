// A two-objective study with the fake trainer (tests/tune/fake_trainer.sh): the second objective is
// measured for each complete trial (here a closed form of its parameters), the Pareto front in
// pareto.json equals pareto_front over the trials' (closed-form value, objective2), the training
// time budget reaches each trial's environment, and a conditional space's inactive key is never
// passed to a trial.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "support/paths.h"
#include "xtrain/base/file_io.h"
#include "xtrain/tune/pareto.h"
#include "xtrain/tune/tuner.h"

namespace xtrain::tune::study_objectives_test {
namespace {

TuneOptions fake_options(const std::string& dir) {
  TuneOptions o;
  o.study_dir = dir;
  o.trials = 8;
  o.parallel = 2;
  o.sampler = "random";
  o.seed = 4;
  o.poll_seconds = 0.02;
  o.print = false;
  o.base_config_text = "{}";
  const std::string script = testing::source_dir() + "/tests/tune/fake_trainer.sh";
  o.command = [script](const TrialLaunch& l) {
    Command c;
    c.argv = {"/bin/sh", script, "--config", l.base_config_path};
    for (const auto& s : l.overrides) c.argv.insert(c.argv.end(), {"--set", s});
    c.argv.insert(c.argv.end(), {"--output", l.run_dir});
    return c;
  };
  return o;
}

// objective2 of a trial from its overrides: 1/lr (a cheap model is one with a high learning rate).
double inverse_lr(const TrialLaunch& l) {
  for (const auto& s : l.overrides)
    if (s.rfind("optimizer.params.lr=", 0) == 0) return 1.0 / std::stod(s.substr(s.find('=') + 1));
  throw std::runtime_error("no lr override");
}

TEST(StudyObjectives, ParetoFrontOverTrialsAndTimeBudget) {
  const auto dir = testing::temp_dir("tune-pareto");
  // "xtrain.model.dropout" is set only when the choice "opt" is "b": the fake trainer then uses
  // its default 0.1 for the others.
  const auto space = SearchSpace::parse(R"({"optimizer.params.lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1},
    "optimizer.type": {"type": "choice", "values": ["AdamW", "SGD"]},
    "xtrain.model.dropout": {"type": "uniform", "low": 0.0, "high": 0.3, "when": {"optimizer.type": "SGD"}}})");
  auto o = fake_options(dir);
  o.objective2 = "inverse_lr";
  o.measure_objective2 = inverse_lr;
  o.trial_seconds = 2.5;
  const auto r = run_study(space, o);
  ASSERT_EQ(r.trials.size(), 8u);
  std::vector<std::pair<double, double>> points;
  for (const auto& t : r.trials) {
    ASSERT_EQ(t.state, TrialState::kComplete) << t.error;
    const double lr = t.params["optimizer.params.lr"].get<double>();
    const double d = t.params.value("xtrain.model.dropout", 0.1);
    EXPECT_EQ(t.params.contains("xtrain.model.dropout"), t.params["optimizer.type"] == "SGD") << t.params.dump();
    const double value = std::pow(std::log10(lr) + 2.5, 2) + 10 * std::pow(d - 0.1, 2) + 1 + 4.0 / 40;
    EXPECT_NEAR(*t.value, value, 1e-12);
    ASSERT_TRUE(t.objective2.has_value());
    EXPECT_NEAR(*t.objective2, 1.0 / lr, 1e-9 / lr);
    points.emplace_back(value, 1.0 / lr);
    const auto out = read_file(dir + "/trials/" + trial_name(t.id) + "/stdout.log");
    EXPECT_NE(out.find("XTRAIN_TRAIN_SECONDS=2.5"), std::string::npos) << out;
    const auto stored = nlohmann::json::parse(read_file(dir + "/trials/" + trial_name(t.id) + ".json"));
    EXPECT_NEAR(stored["objective2"].get<double>(), *t.objective2, 1e-9 * *t.objective2);
  }
  const auto expected = pareto_front(points);
  const auto j = nlohmann::json::parse(read_file(dir + "/pareto.json"));
  EXPECT_EQ(j["objective2"], "inverse_lr");
  ASSERT_EQ(j["front"].size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_EQ(j["front"][k]["trial"], r.trials[expected[k]].id);
  EXPECT_TRUE(std::filesystem::exists(dir + "/pareto.png"));
}

}  // namespace
}  // namespace xtrain::tune::study_objectives_test
