// Reading run directories for the dashboard: which runs exist under a log folder, the complete
// lines of a run's metrics.jsonl from a byte offset (so a live reader only reads what was
// appended), and the stage-time breakdown from its `time/*_ms` metrics. A run is a folder
// directly under the log folder that holds metrics.jsonl; its name must be a single path
// component, which is all the dashboard ever joins to the log folder.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xtrain::monitor {

// Non-empty, at most 255 bytes, not "." or "..", no '/', '\\', NUL or control characters.
bool is_valid_run_name(std::string_view name);

struct RunSummary {
  std::string name;
  int64_t last_step = -1;   // "step" of the last complete line; -1 when none
  double last_update = 0;   // metrics.jsonl modification time, unix seconds
  int64_t metrics_bytes = 0;
  bool has_config = false;  // config.json present
};

// Sorted by name; folders with invalid names are skipped. Empty when `logdir` does not exist.
std::vector<RunSummary> list_runs(const std::string& logdir);

struct MetricsChunk {
  std::vector<std::string> lines;  // complete lines that parse as JSON objects, without '\n'
  int64_t next_offset = 0;         // just after the last complete line read
  bool restarted = false;          // the file is shorter than `offset`: read again from 0
};

// Complete lines of `<run_dir>/metrics.jsonl` from byte `offset` (a line still being written is
// left for the next call); at most `max_bytes` per call.
MetricsChunk read_metrics(const std::string& run_dir, int64_t offset, int64_t max_bytes = 64 << 20);

// {"steps": n, "stages": [{"stage", "mean_ms", "p50_ms", "p90_ms", "share"}, …]} over the lines
// that carry time/step_ms (the first one left out when there are more than two: warm-up), as
// StageTimer::summary() does; share = stage mean / step mean. Stages in step order (data, forward,
// backward, communication, optimizer, then others by name), then "other" and "step".
std::string breakdown_json(const std::vector<std::string>& lines);

// A JSON array of the lines: "[l1,l2,…]".
std::string json_array(const std::vector<std::string>& lines);

// [{"name", "last_step", "last_update", "metrics_bytes", "has_config"}, …]
std::string runs_json(const std::vector<RunSummary>& runs);

}  // namespace xtrain::monitor
