// The sinks of one run, chosen by DeepSpeed's monitor keys: metrics.jsonl (always), TensorBoard
// (`tensorboard.enabled`) and CSV (`csv_monitor.enabled`). Folders: `<output_path>/<job_name>/` as
// DeepSpeed when output_path is set; when it is empty, the run directory itself for TensorBoard
// (so `tensorboard --logdir runs/` lists runs by name) and `<run_dir>/csv/` for the CSV files.
// Call on the rank that writes metrics only.
#pragma once
#include <memory>
#include <string>

#include "xtrain/monitor/metric_sink.h"
#include "xtrain/monitor/options.h"

namespace xtrain::monitor {

std::string tensorboard_dir(const SinkOptions& tensorboard, const std::string& run_dir);
std::string csv_dir(const SinkOptions& csv_monitor, const std::string& run_dir);

// `config_text` (the resolved config), when given, goes to TensorBoard only, as the "config" text
// at `step`: metrics.jsonl stays numbers and events, and config.json already holds it.
// run_dir "": no sinks (ranks other than 0).
std::unique_ptr<MultiSink> make_sinks(const SinkOptions& tensorboard, const SinkOptions& csv_monitor,
                                      const std::string& run_dir, double flush_secs = 10.0,
                                      const std::string& config_text = "", int64_t step = 0);

}  // namespace xtrain::monitor
