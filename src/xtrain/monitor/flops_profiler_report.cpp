// FlopsProfiler::table: the text report, laid out like DeepSpeed's flops profiler output.
#include <algorithm>
#include <cstdio>

#include "xtrain/monitor/flops.h"
#include "xtrain/monitor/flops_profiler.h"

namespace xtrain::monitor {
namespace {

std::string leaf_name(const ModuleProfile& m) {
  if (m.name.empty()) return "(model)";
  const size_t dot = m.name.rfind('.');
  return dot == std::string::npos ? m.name : m.name.substr(dot + 1);
}

std::string pct(double part, double whole) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

std::string top_by_depth(const std::vector<ModuleProfile>& all, int max_depth, int64_t top) {
  std::string out;
  for (int d = 1; d <= max_depth; ++d) {
    std::vector<const ModuleProfile*> at;
    for (const auto& m : all) {
      if (m.depth == d) at.push_back(&m);
    }
    if (at.empty()) break;
    std::stable_sort(at.begin(), at.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
    out += "  depth " + std::to_string(d) + ":";
    for (size_t i = 0; i < at.size() && static_cast<int64_t>(i) < std::max<int64_t>(1, top); ++i) {
      char buf[160];
      std::snprintf(buf, sizeof buf, " %s (%s) %.3f ms, %sFLOPs;", at[i]->name.c_str(), at[i]->type.c_str(),
                    at[i]->seconds * 1e3, si(at[i]->flops).c_str());
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string FlopsProfiler::table(const FlopsProfilerOptions& o, int64_t step) const {
  const auto all = modules();
  const ModuleProfile& root = all.front();
  int deepest = 0;
  for (const auto& m : all) deepest = std::max(deepest, m.depth);
  const int max_depth = o.module_depth < 0 ? deepest : static_cast<int>(o.module_depth);
  const double train = root.flops * (3.0 + o.recompute_fwd_factor);
  char buf[256];
  std::string out = "flops profiler at step " + std::to_string(step) + ": one forward pass, op by op\n";
  std::snprintf(buf, sizeof buf,
                "  params %s | forward %sFLOPs in %.3f ms (%sFLOP/s) | forward+backward %sFLOPs "
                "(forward x %.2f)\n",
                si(static_cast<double>(root.params)).c_str(), si(root.flops).c_str(), root.seconds * 1e3,
                si(root.seconds > 0 ? root.flops / root.seconds : 0).c_str(), si(train).c_str(),
                3.0 + o.recompute_fwd_factor);
  out += buf;
  out += "  FLOPs: matrix products and convolutions. Time: this thread's ATen ops, given to the module that\n"
         "  owns a parameter input (ops without one go to the module around the last one that had).\n";
  out += "top modules by forward time:\n" + top_by_depth(all, max_depth, o.top_modules);
  if (!o.detailed) return out;
  std::snprintf(buf, sizeof buf, "%-34s %-22s %10s %12s %11s %7s %7s\n", "module", "type", "params", "fwd FLOPs",
                "fwd ms", "time", "FLOPs");
  out += buf;
  for (const auto& m : all) {
    if (m.depth > max_depth) continue;
    const std::string name = std::string(2 * m.depth, ' ') + leaf_name(m);
    std::snprintf(buf, sizeof buf, "%-34s %-22s %10s %12s %11.3f %7s %7s\n", name.c_str(), m.type.c_str(),
                  si(static_cast<double>(m.params)).c_str(), si(m.flops).c_str(), m.seconds * 1e3,
                  pct(m.seconds, root.seconds).c_str(), pct(m.flops, root.flops).c_str());
    out += buf;
  }
  return out;
}

}  // namespace xtrain::monitor
