// Which files the dashboard may read: only those that resolve (symlinks followed) to a place
// inside the log folder. A run name is already a single path component (run_reader.h); this adds
// the symlink rule, so a run folder, metrics.jsonl or config.json that links elsewhere
// (`runs/x -> /home/other`, `config.json -> /etc/passwd`) is neither listed nor served. Symlinks
// that stay inside the log folder (`latest -> run-7`) are fine.
#pragma once
#include <string>
#include <vector>

#include "xtrain/monitor/run_reader.h"

namespace xtrain::monitor {

// `path` exists and its canonical form is strictly below the canonical `logdir`.
bool resolves_inside(const std::string& logdir, const std::string& path);
// list_runs(logdir) without the runs whose metrics.jsonl resolves outside `logdir`.
std::vector<RunSummary> list_contained_runs(const std::string& logdir);

}  // namespace xtrain::monitor
