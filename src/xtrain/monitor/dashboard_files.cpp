#include "xtrain/monitor/dashboard_files.h"

#include <filesystem>

namespace xtrain::monitor {
namespace fs = std::filesystem;

bool resolves_inside(const std::string& logdir, const std::string& path) {
  std::error_code ec;
  const fs::path root = fs::canonical(logdir, ec);
  if (ec) return false;
  const fs::path target = fs::canonical(path, ec);
  if (ec) return false;
  // Component-wise prefix: "/runs-other" is not inside "/runs".
  auto r = root.begin(), t = target.begin();
  for (; r != root.end(); ++r, ++t) {
    if (t == target.end() || *r != *t) return false;
  }
  return t != target.end();
}

std::vector<RunSummary> list_contained_runs(const std::string& logdir) {
  std::vector<RunSummary> runs;
  for (auto& r : list_runs(logdir)) {
    const fs::path dir = fs::path(logdir) / r.name;
    if (!resolves_inside(logdir, (dir / "metrics.jsonl").string())) continue;
    r.has_config = r.has_config && resolves_inside(logdir, (dir / "config.json").string());
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace xtrain::monitor
