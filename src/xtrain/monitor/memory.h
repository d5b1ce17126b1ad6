// Process memory for the metrics: resident set size now (/proc/self/statm) and its peak
// (getrusage ru_maxrss), plus whatever per-area byte counts the engine knows (parameters,
// gradients, optimizer state, …), reported in MiB as `memory/<name>_mb`, or as one log line per
// stage of a step (DeepSpeed's memory_breakdown, which prints see_memory_usage on rank 0).
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace xtrain::monitor {

int64_t rss_bytes();       // 0 when /proc is unavailable
int64_t peak_rss_bytes();

// {"memory/rss_mb", "memory/peak_rss_mb", "memory/<area>_mb" for each entry of `area_bytes`}.
std::map<std::string, double> memory_metrics(const std::map<std::string, int64_t>& area_bytes = {});

// "memory after forward: rss 812.3 MiB | peak 901.0 MiB | grads 12.0 MiB | params 12.0 MiB".
std::string memory_breakdown_line(const std::string& stage, const std::map<std::string, int64_t>& area_bytes);

}  // namespace xtrain::monitor
