// report: byte accounting by tensor identity (a tied LM head counts once), timing, the table.
#include "xtrain/compress/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "xtrain/compress/quant/quant_plan.h"

namespace xtrain::compress {

int64_t deploy_bytes(const Graph& graph, const QuantPlan* plan) {
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  auto add_float = [&](const at::Tensor& t) {
    if (t.defined() && seen.insert(t.unsafeGetTensorImpl()).second) bytes += t.numel() * 4;
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    const bool converted = plan && plan->stage() == QuantStage::kConverted && plan->at(i).enabled;
    if (!converted) {
      for (const auto* t : {&n.weight, &n.bias, &n.aux, &n.bn_weight, &n.bn_bias, &n.bn_mean, &n.bn_var}) add_float(*t);
      continue;
    }
    // int8 table or weight (+ one float32 scale per row); a bias per output (BatchNorm folded in).
    auto add_int8 = [&](const at::Tensor& t) {
      if (t.defined() && seen.insert(t.unsafeGetTensorImpl()).second) bytes += t.numel() + t.size(0) * 4;
    };
    add_int8(n.weight);
    add_int8(n.aux);
    if (n.kind == OpKind::kConv2d || n.kind == OpKind::kLinear) {
      if (n.bias.defined() || n.bn_weight.defined()) bytes += n.weight.size(0) * 4;
    }
  }
  return bytes;
}

double median_latency_ms(const std::function<void()>& call, int64_t repeats) {
  for (int i = 0; i < 2; ++i) call();
  std::vector<double> ms;
  for (int64_t i = 0; i < std::max<int64_t>(1, repeats); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

namespace {

std::string cell(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string row(const std::string& name, const std::vector<std::string>& cells) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "| %-22s", name.c_str());
  std::string out = buf;
  for (const auto& c : cells) {
    std::snprintf(buf, sizeof buf, "| %16s ", c.c_str());
    out += buf;
  }
  return out + "|\n";
}

}  // namespace

std::string format_summary(const std::vector<ModelStats>& stats, bool lm) {
  if (stats.empty()) return "";
  std::vector<std::string> head, size, params, sparsity, quality, quality2, latency;
  for (const auto& s : stats) {
    head.push_back(s.label);
    size.push_back(cell("%.3f MB", static_cast<double>(s.bytes) / 1e6));
    params.push_back(std::to_string(s.parameters));
    sparsity.push_back(cell("%.1f%%", 100.0 * s.sparsity));
    quality.push_back(lm ? cell("%.4f", std::exp(s.loss)) : cell("%.2f%%", 100.0 * s.accuracy));
    quality2.push_back(cell("%.4f", s.loss));
    latency.push_back(cell("%.2f ms", s.latency_ms));
  }
  const auto& b = stats.front();
  const auto& a = stats.back();
  head.push_back("after/before");
  size.push_back(cell("%.3fx", static_cast<double>(a.bytes) / std::max<int64_t>(1, b.bytes)));
  params.push_back(cell("%.3fx", static_cast<double>(a.parameters) / std::max<int64_t>(1, b.parameters)));
  sparsity.push_back(cell("%+.1f pts", 100.0 * (a.sparsity - b.sparsity)));
  quality.push_back(lm ? cell("%+.2f%%", 100.0 * (std::exp(a.loss - b.loss) - 1)) : cell("%+.2f pts", 100.0 * (a.accuracy - b.accuracy)));
  quality2.push_back(cell("%+.4f", a.loss - b.loss));
  latency.push_back(cell("%.2fx faster", b.latency_ms / std::max(1e-9, a.latency_ms)));
  std::string out = row("", head);
  out += "|" + std::string(23, '-');
  for (size_t i = 0; i < head.size(); ++i) out += "|" + std::string(18, '-');
  out += "|\n";
  out += row("size (weights)", size) + row("parameters", params) + row("weight sparsity", sparsity);
  out += row(lm ? "val perplexity" : "val accuracy", quality) + row("val loss", quality2) + row("latency", latency);
  return out;
}

}  // namespace xtrain::compress
