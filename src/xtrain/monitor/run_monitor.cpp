#include "xtrain/monitor/run_monitor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/monitor/memory.h"
#include "xtrain/monitor/sinks.h"

namespace xtrain::monitor {

void check_options(const RunMonitorOptions& o) {
  XTRAIN_USAGE_CHECK(o.monitor.peak_tflops >= 0, "monitor: peak_tflops must be >= 0, got ", o.monitor.peak_tflops,
                     " (xtrain.monitor.peak_tflops)");
  XTRAIN_USAGE_CHECK(o.monitor.histogram_interval >= 0, "monitor: histogram_interval must be >= 0, got ",
                     o.monitor.histogram_interval, " (xtrain.monitor.histogram_interval)");
  XTRAIN_USAGE_CHECK(o.monitor.flush_secs > 0, "monitor: flush_secs must be > 0, got ", o.monitor.flush_secs,
                     " (xtrain.monitor.flush_secs)");
  TORCH_CHECK(o.devices >= 1, "monitor: devices must be >= 1, got ", o.devices);
  XTRAIN_USAGE_CHECK(!o.flops_profiler.enabled || o.flops_profiler.profile_step >= 1,
                     "monitor: flops_profiler.profile_step must be >= 1, got ", o.flops_profiler.profile_step,
                     " (flops_profiler.profile_step)");
}

namespace {

RunMonitorOptions validated(RunMonitorOptions o) {
  check_options(o);
  return o;
}

}  // namespace

RunMonitor::RunMonitor(RunMonitorOptions options, const std::string& run_dir, const std::string& config_json,
                       int64_t step)
    : o_(validated(std::move(options))),
      sinks_(make_sinks(o_.tensorboard, o_.csv_monitor, run_dir, o_.monitor.flush_secs, config_json, step)),
      timer_(o_.wall_clock_breakdown || o_.flops_profiler.enabled) {
  if (o_.monitor.peak_tflops > 0) {
    peak_ = o_.monitor.peak_tflops * 1e12;
    peak_source_ = "xtrain.monitor.peak_tflops";
  } else if (o_.train_flops_per_unit > 0 || o_.flops_profiler.enabled) {
    init_peak();
  }
}

RunMonitor::~RunMonitor() = default;

// The peak of the GEMM the layers use, in the dtype they compute in, at this thread count: from
// the cache (checked by timing its best shape once more), else measured and stored. CUDA measures
// every run (the key cannot name the GPU).
void RunMonitor::init_peak() {
  peak_cache_path_ = o_.peak_cache.empty() ? default_peak_cache_path() : o_.peak_cache == "off" ? "" : o_.peak_cache;
  if (!o_.device.is_cpu()) peak_cache_path_.clear();
  const PeakCache cache(peak_cache_path_);
  ResolvedPeak r;
  for (const auto dtype : {o_.bf16 ? at::kBFloat16 : at::kFloat, at::kFloat}) {
    try {
      peak_key_ = peak_key(o_.device, dtype, o_.peak_gemm_name);
      r = resolve_peak(
          peak_key_, cache, [&] { return measure_gemm_peak(o_.device, dtype, o_.peak_gemm); },
          [&](const std::string& shape) { return measure_gemm_shape(o_.device, dtype, o_.peak_gemm, shape); });
      break;
    } catch (const c10::Error& e) {  // no bf16 GEMM on this device/build: the fp32 peak
      log::warn("monitor: no ", peak_key_.dtype, " GEMM for the MFU peak (", e.what_without_backtrace(), "); using fp32");
    }
  }
  peak_ = r.flops;
  if (peak_ <= 0) return;
  peak_source_ = r.measured ? "measured" : "cached";
  log::info("peak for MFU: ", si(peak_), "FLOP/s ", peak_key_.dtype, " (", peak_key_.gemm, ", ", peak_key_.threads,
            " threads; ", r.measured ? "measured, " : "", r.detail,
            r.measured && !peak_cache_path_.empty() ? "; stored in " + peak_cache_path_ : std::string(), ")");
}

double RunMonitor::raw_mfu(double units_per_second) const {
  if (o_.train_flops_per_unit <= 0) return 0.0;
  return monitor::mfu(o_.train_flops_per_unit * units_per_second, 1.0, peak_ * static_cast<double>(o_.devices));
}

double RunMonitor::mfu(double units_per_second) {
  const double m = raw_mfu(units_per_second);
  if (m <= 1.0) return m;
  if (peak_source_ == "xtrain.monitor.peak_tflops") {
    if (!warned_above_user_peak_) {
      log::warn("monitor: the model runs at ", si(o_.train_flops_per_unit * units_per_second / o_.devices),
                "FLOP/s per device, above xtrain.monitor.peak_tflops (", si(peak_),
                "FLOP/s); MFU is shown as 100%: raise xtrain.monitor.peak_tflops, or set it to 0 to measure");
      warned_above_user_peak_ = true;
    }
    return 1.0;
  }
  raise_peak(o_.train_flops_per_unit * units_per_second / static_cast<double>(o_.devices));
  return 1.0;
}

// A model-FLOP rate above the measured GEMM peak: the measurement was low (noise, or the model's
// GEMMs beat the shapes timed). The rate becomes the peak; growth above 1% is logged and stored.
void RunMonitor::raise_peak(double flops_per_device) {
  const bool notable = flops_per_device > 1.01 * peak_;
  const double before = peak_;
  peak_ = flops_per_device;
  if (!notable) return;
  log::info("monitor: training reached ", si(flops_per_device), "FLOP/s per device, above the MFU peak of ",
            si(before), "FLOP/s: the peak is raised to it",
            peak_cache_path_.empty() ? std::string() : " and stored in " + peak_cache_path_);
  PeakCache(peak_cache_path_).store(peak_key_, flops_per_device, "training", "model FLOPs of a training step");
}

void RunMonitor::begin_step() {
  timer_.begin_step();
  step_start_ = std::chrono::steady_clock::now();
  in_step_ = true;
}

void RunMonitor::end_step(const StepReport& r, bool log) {
  const auto times = timer_.end_step();
  if (in_step_) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
    window_units_ += r.units;
    window_seconds_ += s;
    total_units_ += r.units;
    total_seconds_ += s;
    in_step_ = false;
  }
  if (!log) return;
  const double rate = window_seconds_ > 0 ? window_units_ / window_seconds_ : 0.0;
  const double step_mfu = mfu(rate);
  window_units_ = window_seconds_ = 0;
  std::map<std::string, double> m = {{"train/loss", r.loss},
                                     {"train/lr", r.lr},
                                     {"train/grad_norm", r.grad_norm},
                                     {"train/skipped_steps", static_cast<double>(r.skipped_steps)},
                                     {"train/samples", static_cast<double>(r.samples)},
                                     {"train/" + o_.unit + "_per_s", rate}};
  if (o_.unit == "tokens") m["train/ppl"] = std::exp(r.loss);
  if (r.loss_scale > 0) m["train/loss_scale"] = r.loss_scale;
  if (step_mfu > 0) m["train/mfu"] = step_mfu;
  for (const auto& [k, v] : memory_metrics(r.memory_bytes)) m[k] = v;
  for (const auto& [k, v] : times) m[k] = v;
  sinks_->write(r.step, m);
}

void RunMonitor::write_eval(int64_t step, double loss, double accuracy) {
  std::map<std::string, double> m = {{"val/loss", loss}};
  if (o_.unit == "tokens") m["val/ppl"] = std::exp(loss);
  if (accuracy >= 0) m["val/accuracy"] = accuracy;
  sinks_->write(step, m);
}

bool RunMonitor::profile_due(int64_t step) const {
  return o_.flops_profiler.enabled && step == o_.flops_profiler.profile_step && !profiler_;
}

void RunMonitor::start_profile(const torch::nn::Module& model) {
  profiler_ = std::make_unique<FlopsProfiler>(model);
  profiler_->start();
}

std::string RunMonitor::finish_profile(int64_t step, double units) {
  TORCH_CHECK(profiler_ != nullptr, "monitor: finish_profile without start_profile");
  profiler_->stop();
  const std::string table = profiler_->table(o_.flops_profiler, step);
  if (o_.train_flops_per_unit <= 0 && units > 0) {
    o_.train_flops_per_unit = profiler_->forward_flops() * 3.0 / units;  // backward = 2x forward
  }
  if (!o_.flops_profiler.output_file.empty()) {
    std::FILE* f = std::fopen(o_.flops_profiler.output_file.c_str(), "w");
    XTRAIN_USAGE_CHECK(f != nullptr, "monitor: cannot write ", o_.flops_profiler.output_file,
                       " (flops_profiler.output_file)");
    std::fputs(table.c_str(), f);
    std::fclose(f);
  }
  sinks_->write_text(step, "flops_profiler", table);
  return table;
}

bool RunMonitor::histograms_due(int64_t step) const {
  return o_.monitor.histogram_interval > 0 && step % o_.monitor.histogram_interval == 0;
}

void RunMonitor::write_histograms(int64_t step, const std::string& prefix,
                                  const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  for (const auto& [name, t] : tensors) {
    if (t.defined()) sinks_->write_histogram(step, prefix + name, make_histogram(t));
  }
}

std::string RunMonitor::summary() const {
  std::string out = timer_.summary();
  const double overall = std::min(1.0, raw_mfu(total_seconds_ > 0 ? total_units_ / total_seconds_ : 0.0));
  if (overall > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "MFU: %.1f%% over the run (%s %s/s inside steps; peak %sFLOP/s)\n", 100.0 * overall,
                  si(total_units_ / total_seconds_).c_str(), o_.unit.c_str(), si(peak_).c_str());
    out += buf;
  }
  return out;
}

}  // namespace xtrain::monitor
