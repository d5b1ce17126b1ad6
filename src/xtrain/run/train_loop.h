// The pieces of `train` (train.cpp) after the build: the monitor, the progress line and the
// losses of one run, one optimizer step's micro-batches, and what follows each step (metrics,
// evaluation, checkpoints) and the run (final score, last checkpoint, sample, summary). Internal.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/monitor/progress.h"
#include "xtrain/monitor/run_monitor.h"
#include "xtrain/run/setup.h"
#include "xtrain/run/train.h"

namespace xtrain {

// "%.*g": the numbers of progress lines and summaries.
std::string fmt(double v, int precision = 4);

// The start-up lines: run, model, data, batch, precision, parallelism, memory per rank.
void log_start(const Setup& s, const std::string& run_dir);

class TrainLoop {
 public:
  // `resumed`: the engine holds a checkpoint's state (nothing to save at its step).
  TrainLoop(Setup& s, std::string run_dir, bool resumed);
  // Runs optimizer steps until xtrain.steps, then the end of the run.
  TrainResult run();

 private:
  void step();        // one optimizer step's micro-batches
  void after_step();  // divergence check, progress, metrics, evaluation, checkpoint
  void report(const StepStats& st);
  TrainResult finish();
  void summarise(const TrainResult& result);
  double work_per_step() const;  // tokens (or samples) per optimizer step

  Setup& s_;
  std::string run_dir_;
  monitor::RunMonitor mon_;
  monitor::Progress progress_;
  std::vector<double> losses_;
  int64_t steps_, log_every_, last_saved_;
};

}  // namespace xtrain
