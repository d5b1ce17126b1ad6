// Monitors: `tensorboard`, `csv_monitor`, `wandb`, `comet` (reference/deepspeed.md §a.11),
// `flops_profiler` and `comms_logger` (§a.12), and ours under `xtrain.monitor`. metrics.jsonl and
// the console line are always on.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::monitor {

struct SinkOptions {  // tensorboard, csv_monitor
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "write this kind of log");
    v("output_path", output_path, "folder (default: the run directory)");
    v("job_name", job_name, "subfolder under output_path");
  }
};

struct WandbOptions {
  bool enabled = false;
  std::string group, team, project = "deepspeed";
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "Weights & Biases (not supported: no network)");
    v("group", group, "");
    v("team", team, "");
    v("project", project, "");
  }
};

struct CometOptions {
  bool enabled = false;
  int64_t samples_log_interval = 100;
  std::string project, workspace, api_key, experiment_name, experiment_key, mode;
  bool online = true;
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "Comet (not supported: no network)");
    v("samples_log_interval", samples_log_interval, "");
    v("project", project, "");
    v("workspace", workspace, "");
    v("api_key", api_key, "");
    v("experiment_name", experiment_name, "");
    v("experiment_key", experiment_key, "");
    v("online", online, "");
    v("mode", mode, "");
  }
};

struct FlopsProfilerOptions {
  bool enabled = false;
  int64_t profile_step = 1;
  int64_t module_depth = -1;
  int64_t top_modules = 1;
  bool detailed = true;
  std::string output_file;
  double recompute_fwd_factor = 0.0;
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "per-module parameters, FLOPs and time at profile_step");
    v("profile_step", profile_step, "optimizer step to profile");
    v("module_depth", module_depth, "depth of the module table (-1: all)");
    v("top_modules", top_modules, "modules listed per depth");
    v("detailed", detailed, "print every module");
    v("output_file", output_file, "write the table here (default: console)");
    v("recompute_fwd_factor", recompute_fwd_factor, "extra forward FLOPs from recomputation");
  }
};

// `xtrain.monitor` (ours: DeepSpeed has no keys for these).
struct MonitorOptions {
  double peak_tflops = 0.0;        // the MFU denominator; 0: measured at start (at::matmul)
  int64_t histogram_interval = 0;  // TensorBoard histograms of weights and gradients every N steps
  double flush_secs = 10.0;        // TensorBoard event files are flushed at least this often
  template <class V>
  void visit(V& v) {
    v("peak_tflops", peak_tflops, "peak TFLOP/s for MFU (0: measure a large GEMM at start)");
    v("histogram_interval", histogram_interval, "weight and gradient histograms every N steps (0: off)");
    v("flush_secs", flush_secs, "flush TensorBoard event files at least every N seconds");
  }
};

struct CommsLoggerOptions {
  bool enabled = false, verbose = false, prof_all = true, debug = false;
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "log collective sizes and times");
    v("verbose", verbose, "");
    v("prof_all", prof_all, "");
    v("debug", debug, "");
  }
};

}  // namespace xtrain::monitor
