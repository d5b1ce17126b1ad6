#include "xtrain/monitor/run_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

namespace xtrain::monitor {
namespace fs = std::filesystem;

bool is_valid_run_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (unsigned char c : name) {
    if (c == '/' || c == '\\' || c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

namespace {

double mtime_seconds(const fs::path& p) {
  std::error_code ec;
  const auto t = fs::last_write_time(p, ec);
  if (ec) return 0;
  // file_time_type's epoch is unspecified before C++20; shift through "now" on both clocks.
  const auto sys = std::chrono::system_clock::now() + (t - fs::file_time_type::clock::now());
  return std::chrono::duration<double>(sys.time_since_epoch()).count();
}

int64_t last_step(const fs::path& metrics, int64_t size) {
  const int64_t tail = std::min<int64_t>(size, 64 << 10);
  const MetricsChunk c = read_metrics(metrics.parent_path().string(), size - tail);
  for (auto it = c.lines.rbegin(); it != c.lines.rend(); ++it) {
    const auto j = nlohmann::json::parse(*it, nullptr, false);
    if (j.is_object() && j.contains("step") && j["step"].is_number()) return j["step"].get<int64_t>();
  }
  return -1;
}

}  // namespace

std::vector<RunSummary> list_runs(const std::string& logdir) {
  std::vector<RunSummary> runs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(logdir, ec)) {
    const std::string name = entry.path().filename().string();
    const fs::path metrics = entry.path() / "metrics.jsonl";
    if (!is_valid_run_name(name) || !fs::is_regular_file(metrics, ec)) continue;
    RunSummary r;
    r.name = name;
    r.metrics_bytes = static_cast<int64_t>(fs::file_size(metrics, ec));
    r.last_update = mtime_seconds(metrics);
    r.has_config = fs::is_regular_file(entry.path() / "config.json", ec);
    r.last_step = last_step(metrics, r.metrics_bytes);
    runs.push_back(std::move(r));
  }
  std::sort(runs.begin(), runs.end(), [](const RunSummary& a, const RunSummary& b) { return a.name < b.name; });
  return runs;
}

MetricsChunk read_metrics(const std::string& run_dir, int64_t offset, int64_t max_bytes) {
  MetricsChunk c;
  c.next_offset = offset;
  std::FILE* f = std::fopen((fs::path(run_dir) / "metrics.jsonl").c_str(), "rb");
  if (f == nullptr) return c;
  std::fseek(f, 0, SEEK_END);
  const int64_t size = std::ftell(f);
  if (size < offset) {  // replaced or truncated: the reader starts over
    c.restarted = true;
    offset = c.next_offset = 0;
  }
  std::string buf(static_cast<size_t>(std::min(size - offset, max_bytes)), '\0');
  std::fseek(f, offset, SEEK_SET);
  buf.resize(std::fread(&buf[0], 1, buf.size(), f));
  std::fclose(f);
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = buf.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.front() == '{' && nlohmann::json::accept(line)) c.lines.push_back(std::move(line));
  }
  c.next_offset = offset + static_cast<int64_t>(start);
  return c;
}

namespace {

struct Stat {
  double mean = 0, p50 = 0, p90 = 0;
};

Stat stats(std::vector<double> v) {
  Stat s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(p * v.size())) - 1)]; };
  s.p50 = rank(0.5);
  s.p90 = rank(0.9);
  return s;
}

}  // namespace

std::string breakdown_json(const std::vector<std::string>& lines) {
  std::vector<nlohmann::json> steps;
  for (const auto& l : lines) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_object() && j.contains("time/step_ms") && j["time/step_ms"].is_number()) steps.push_back(std::move(j));
  }
  if (steps.size() > 2) steps.erase(steps.begin());
  std::map<std::string, std::vector<double>> values;
  for (const auto& j : steps) {
    for (const auto& [key, v] : j.items()) {
      if (key.rfind("time/", 0) != 0 || key.size() < 9 || key.compare(key.size() - 3, 3, "_ms") != 0) continue;
      values[key.substr(5, key.size() - 8)];
    }
  }
  // The order of a step (JSON objects keep none), then any other stage by name, then the totals.
  std::vector<std::string> order;
  for (const char* known : {"data", "forward", "backward", "communication", "optimizer"}) {
    if (values.count(known)) order.push_back(known);
  }
  for (const auto& [stage, v] : values) {
    if (std::find(order.begin(), order.end(), stage) == order.end() && stage != "other" && stage != "step") {
      order.push_back(stage);
    }
  }
  order.push_back("other");
  order.push_back("step");
  for (const auto& j : steps) {  // a stage missing from a step took 0 ms in it
    for (const auto& stage : order) {
      const auto it = j.find("time/" + stage + "_ms");
      values[stage].push_back(it != j.end() && it->is_number() ? it->get<double>() : 0.0);
    }
  }
  const double step_mean = stats(values["step"]).mean;
  nlohmann::json out = {{"steps", steps.size()}, {"stages", nlohmann::json::array()}};
  if (steps.empty()) return out.dump();
  for (const auto& stage : order) {
    const Stat s = stats(values[stage]);
    out["stages"].push_back({{"stage", stage}, {"mean_ms", s.mean}, {"p50_ms", s.p50}, {"p90_ms", s.p90},
                             {"share", step_mean > 0 ? s.mean / step_mean : 0.0}});
  }
  return out.dump();
}

std::string json_array(const std::vector<std::string>& lines) {
  std::string out = "[";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += ',';
    out += lines[i];
  }
  return out + "]";
}

std::string runs_json(const std::vector<RunSummary>& runs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : runs) {
    out.push_back({{"name", r.name}, {"last_step", r.last_step}, {"last_update", r.last_update},
                   {"metrics_bytes", r.metrics_bytes}, {"has_config", r.has_config}});
  }
  return out.dump();
}

}  // namespace xtrain::monitor
