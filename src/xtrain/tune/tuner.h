// The study loop of `xtrain tune`: propose parameters, run each trial as a child process with
// config overrides in its own run directory, follow its metrics.jsonl, stop it early when the
// pruner says so, and keep every trial on disk so that a killed study resumes where it stopped.
// The trial command comes from the caller (the CLI runs `xtrain train`; tests run a small script):
// tune never links the engine. Trials still "running" when a study is resumed are re-run with the
// same parameters; failed trials are kept as they are and never re-run.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/tune/process.h"
#include "xtrain/tune/pruner.h"
#include "xtrain/tune/space.h"
#include "xtrain/tune/trial.h"

namespace xtrain::tune {

struct TrialLaunch {
  int64_t id = 0;
  std::vector<std::string> overrides;  // fixed --set first, then the trial's parameters
  std::string run_dir;                 // STUDY/trials/<id>
  std::string base_config_path;        // STUDY/base_config.json, or "" when the study has none
};

using CommandBuilder = std::function<Command(const TrialLaunch&)>;
// The second objective of a complete trial (minimised): e.g. the CLI builds the trial's model and
// counts its parameters or times its forward pass. Exceptions become a warning and no value.
using Objective2 = std::function<double(const TrialLaunch&)>;
// Writes the convergence plot (best so far against trial number) as a PNG; optional.
using PlotWriter = std::function<void(const std::string& path, const std::vector<double>& trial_numbers,
                                      const std::vector<double>& best_so_far, const std::string& metric)>;

struct TuneOptions {
  std::string study_dir;
  int64_t trials = 20;  // total trials in the study (a resumed study runs the missing ones)
  int64_t parallel = 1;
  std::string metric = "val_loss";  // "val_loss" reads "val/loss"; an exact key works too
  std::string mode = "min";         // min | max
  std::string sampler = "gp";       // gp | random
  int64_t gp_initial = 0;           // gp: random trials before the GP (0: max(5, encoded dims + 1))
  std::string pruner = "none";      // none | median | asha
  PrunerOptions pruning;
  uint64_t seed = 0;
  int64_t max_failures = 3;                  // consecutive failed trials that stop the study
  std::string base_config_text;              // "" = trials get no --config and no validation
  std::vector<std::string> fixed_overrides;  // --set for every trial (e.g. xtrain.steps=150)
  CommandBuilder command;
  PlotWriter plot;
  // > 0: each trial trains for this many seconds of training time, then evaluates: the trial's
  // environment gets XTRAIN_TRAIN_SECONDS (the run loop stops after the step that reaches it;
  // xtrain.steps stays the upper bound and the schedule's length). The steps done are the trial's
  // "step".
  double trial_seconds = 0.0;
  std::string objective2;         // "" (one objective), or its name in tables ("params", "latency_ms")
  Objective2 measure_objective2;  // required when objective2 is set
  double poll_seconds = 0.2;
  double kill_grace_seconds = 10.0;
  bool print = true;  // progress table and summary on the log
};

struct TuneResult {
  std::vector<Trial> trials;  // every trial of the study, by id
  int64_t best_id = -1;       // best complete trial, -1 when none
  std::string stop_reason;    // non-empty when the study stopped early (too many failures)
};

// The metric keys looked for in metrics.jsonl: {"val_loss", "val/loss"} for "val_loss".
std::vector<std::string> metric_keys(const std::string& metric);

TuneResult run_study(const SearchSpace& space, const TuneOptions& options);

}  // namespace xtrain::tune
