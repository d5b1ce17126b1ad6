// RunMonitor: everything a training loop reports, behind a few calls. It owns the sinks chosen by
// the monitor keys (metrics.jsonl always; TensorBoard, CSV), writes the resolved config as a text
// event, times stages (`wall_clock_breakdown`, or `flops_profiler.enabled` as in DeepSpeed),
// runs the flops profiler at `profile_step`, finds the GEMM peak for MFU (unless
// `xtrain.monitor.peak_tflops` gives it: flops.h's per-machine cache, else a measurement stored
// there), and writes per-step scalars: train/loss, train/ppl
// (tokens), train/lr, train/grad_norm, train/loss_scale, train/skipped_steps,
// train/<unit>_per_s, train/samples, train/mfu, memory/*, time/*_ms; and val/loss, val/ppl,
// val/accuracy. It knows no engine or model class: the loop hands it numbers and modules.
// MFU is never above 1: a rate above a measured peak shows the measurement was low, so the peak is
// raised to that rate (logged, and stored in the cache when it grows by more than 1%); a rate above
// a peak the user gave is shown as 1 with a warning (the user's number stays).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/monitor/flops.h"
#include "xtrain/monitor/flops_profiler.h"
#include "xtrain/monitor/metric_sink.h"
#include "xtrain/monitor/options.h"
#include "xtrain/monitor/stage_timer.h"

namespace torch::nn {
class Module;
}

namespace xtrain::monitor {

struct RunMonitorOptions {
  SinkOptions tensorboard, csv_monitor;
  FlopsProfilerOptions flops_profiler;
  MonitorOptions monitor;
  bool wall_clock_breakdown = false;
  std::string unit = "tokens";        // "tokens" (language models) or "samples"
  double train_flops_per_unit = 0;    // model FLOPs per token/sample; 0: learnt at the profile step
  bool bf16 = false;                  // MFU against the bf16 peak
  int64_t devices = 1;                // ranks sharing the step's work: MFU divides by all their peaks
  c10::Device device = c10::Device(c10::kCPU);
  GemmFn peak_gemm;                   // the GEMM to time for the peak (empty: at::matmul)
  std::string peak_gemm_name = "at::matmul";
  std::string peak_cache;             // the peak cache file; "": default_peak_cache_path(); "off": none
};

struct StepReport {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double loss_scale = 0;            // fp16's current loss scale; 0: no loss scaling
  int64_t skipped_steps = 0;        // so far
  int64_t samples = 0;              // global samples so far
  double units = 0;                 // tokens or samples this step processed
  std::map<std::string, int64_t> memory_bytes;  // per area: "params", "grads", "optimizer", …
};

// The option checks RunMonitor's constructor runs (a UsageError naming the key); the engine's
// check_run_config runs them before any work (`xtrain config`).
void check_options(const RunMonitorOptions& options);

class RunMonitor {
 public:
  RunMonitor(RunMonitorOptions options, const std::string& run_dir, const std::string& config_json, int64_t step);
  ~RunMonitor();

  StageTimer& timer() { return timer_; }
  MetricSink& sinks() { return *sinks_; }
  double peak_flops() const { return peak_; }  // FLOP/s per device; 0 when unknown
  // Where the peak came from: "xtrain.monitor.peak_tflops", "measured", "cached", or "" (none).
  const std::string& peak_source() const { return peak_source_; }

  void begin_step();
  // Ends the step's timing (always, for the summary) and writes its metrics when `log`.
  // Throughput (train/<unit>_per_s, and MFU from it) is the units over the time spent inside
  // steps since the last logged step: evaluation and checkpoints between steps do not count.
  void end_step(const StepReport& report, bool log);
  // accuracy < 0: none.
  void write_eval(int64_t step, double loss, double accuracy);

  // flops_profiler: true for the step that should be profiled (its first forward).
  bool profile_due(int64_t step) const;
  void start_profile(const torch::nn::Module& model);
  // Stops, returns the table (also written to flops_profiler.output_file when set) and, when the
  // FLOPs per unit were unknown, learns them from the forward that processed `units`.
  std::string finish_profile(int64_t step, double units);

  bool histograms_due(int64_t step) const;
  void write_histograms(int64_t step, const std::string& prefix,
                        const std::vector<std::pair<std::string, at::Tensor>>& tensors);

  // Of the whole job: units/s times FLOPs per unit over `devices` times the per-device peak, at
  // most 1 (a higher rate raises a measured peak; see above).
  double mfu(double units_per_second);
  // End of run: the stage-time table (when timing) and the mean MFU.
  std::string summary() const;

 private:
  RunMonitorOptions o_;
  std::unique_ptr<MultiSink> sinks_;
  StageTimer timer_;
  std::unique_ptr<FlopsProfiler> profiler_;
  void init_peak();
  double raw_mfu(double units_per_second) const;  // unclamped
  void raise_peak(double flops_per_device);

  double peak_ = 0;
  std::string peak_source_;
  PeakKey peak_key_;   // of a measured or cached peak (dtype empty otherwise)
  std::string peak_cache_path_;
  bool warned_above_user_peak_ = false;
  bool in_step_ = false;
  std::chrono::steady_clock::time_point step_start_;
  double window_units_ = 0, window_seconds_ = 0;  // since the last logged step
  double total_units_ = 0, total_seconds_ = 0;
};

}  // namespace xtrain::monitor
