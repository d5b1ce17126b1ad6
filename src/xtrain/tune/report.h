// What a study shows and leaves behind: the progress table (one row per finished trial), the
// final table of trials, metrics.jsonl kept up to date while the study runs, and the files at the
// end — best_params.json, best_config.json (the base config with the best overrides, resolved by
// the config reader), convergence.jsonl (best so far per trial) and convergence.png (PlotWriter).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xtrain/monitor/metric_sink.h"
#include "xtrain/tune/space.h"
#include "xtrain/tune/trial.h"
#include "xtrain/tune/tuner.h"

namespace xtrain::tune {

class TrialTable {
 public:
  // `objective2`: "" or the second objective's name (a column after the metric's).
  TrialTable(const SearchSpace& space, std::string metric, std::string objective2 = "");
  std::string header() const;
  std::string row(const Trial& trial) const;
  std::string table(const std::vector<Trial>& trials) const;  // header + rows
  std::string describe(const Params& params) const;           // "lr=3.20e-03 warmup_num_steps=40"

 private:
  std::vector<std::string> keys_, labels_;
  std::string metric_, objective2_;
};

// STUDY/metrics.jsonl in the trainer's format, so the dashboard shows a running study like a run:
// one line per finished trial, step = trials finished so far, with tune/value, tune/best and
// tune/trial. Rewritten from the trials on disk when a study (re)starts, then appended to.
class StudyMetrics {
 public:
  StudyMetrics(const std::string& study_dir, double sign, const std::vector<Trial>& trials);
  ~StudyMetrics();
  void add(const Trial& trial);

 private:
  std::string path_;
  double sign_;
  int64_t step_ = 0;
  std::optional<double> best_;
  std::unique_ptr<monitor::MetricSink> sink_;
};

// Index of the best complete trial (sign: +1 minimise, -1 maximise), or -1.
int64_t best_trial_index(const std::vector<Trial>& trials, double sign);

// Writes the end-of-study files into the study folder; returns the paths written.
std::vector<std::string> write_study_outputs(const std::string& study_dir, const SearchSpace& space,
                                             const std::vector<Trial>& trials, double sign, const TuneOptions& options);

}  // namespace xtrain::tune
