#include "xtrain/monitor/sinks.h"

#include <filesystem>

#include "xtrain/monitor/csv_sink.h"
#include "xtrain/monitor/jsonl_sink.h"
#include "xtrain/monitor/tensorboard_sink.h"

namespace xtrain::monitor {
namespace fs = std::filesystem;

std::string tensorboard_dir(const SinkOptions& o, const std::string& run_dir) {
  return o.output_path.empty() ? run_dir : (fs::path(o.output_path) / o.job_name).string();
}

std::string csv_dir(const SinkOptions& o, const std::string& run_dir) {
  return o.output_path.empty() ? (fs::path(run_dir) / "csv").string() : (fs::path(o.output_path) / o.job_name).string();
}

std::unique_ptr<MultiSink> make_sinks(const SinkOptions& tensorboard, const SinkOptions& csv_monitor,
                                      const std::string& run_dir, double flush_secs, const std::string& config_text,
                                      int64_t step) {
  auto sinks = std::make_unique<MultiSink>();
  if (run_dir.empty()) return sinks;  // a rank that does not write metrics (only rank 0 does)
  fs::create_directories(run_dir);
  sinks->add(std::make_unique<JsonlSink>((fs::path(run_dir) / "metrics.jsonl").string()));
  if (tensorboard.enabled) {
    auto tb = std::make_unique<TensorBoardSink>(tensorboard_dir(tensorboard, run_dir), flush_secs);
    if (!config_text.empty()) tb->write_text(step, "config", config_text);
    sinks->add(std::move(tb));
  }
  if (csv_monitor.enabled) sinks->add(std::make_unique<CsvSink>(csv_dir(csv_monitor, run_dir)));
  return sinks;
}

}  // namespace xtrain::monitor
