// QuantPlan: layer selection and the stage transitions.
#include "xtrain/compress/quant/quant_plan.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::compress {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void check_options(const QuantOptions& o, const Graph& g) {
  XTRAIN_USAGE_CHECK(o.mode == "static" || o.mode == "dynamic" || o.mode == "qat",
                     "compress: quantization.mode must be static, dynamic or qat, got \"", o.mode, "\"",
                     did_you_mean_suffix(o.mode, {"static", "dynamic", "qat"}));
  const std::vector<std::string> types = {"Linear", "Conv2d", "Embedding"};
  for (const auto& t : o.op_types) {
    XTRAIN_USAGE_CHECK(contains(types, t), "compress: quantization.op_types: \"", t,
                       "\" cannot be quantised (Linear, Conv2d, Embedding)", did_you_mean_suffix(t, types));
  }
  std::vector<std::string> names;
  for (const auto& n : g.nodes) names.push_back(n.name);
  for (const auto* list : {&o.op_names, &o.exclude_op_names}) {
    for (const auto& n : *list) {
      XTRAIN_USAGE_CHECK(contains(names, n), "compress: quantization op_names: the model has no layer \"", n, "\"",
                         did_you_mean_suffix(n, names));
    }
  }
}

}  // namespace

QuantPlan::QuantPlan(const Graph& graph, const QuantOptions& options) : options_(options) {
  check_options(options, graph);
  layers_.resize(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    const bool kind_ok = n.kind == OpKind::kLinear || n.kind == OpKind::kConv2d || n.kind == OpKind::kEmbedTokens;
    bool on = kind_ok && contains(options.op_types, n.op_type) &&
              (options.op_names.empty() || contains(options.op_names, n.name)) &&
              !contains(options.exclude_op_names, n.name);
    if (options.mode == "dynamic" && n.kind == OpKind::kConv2d) on = false;  // dynamic: Linear (and tables) only
    layers_[i].enabled = on;
    layers_[i].dynamic = on && options.mode == "dynamic" && n.kind == OpKind::kLinear;
  }
}

int64_t QuantPlan::num_enabled() const {
  return std::count_if(layers_.begin(), layers_.end(), [](const LayerQuant& l) { return l.enabled; });
}

void QuantPlan::start_calibration() {
  for (auto& l : layers_) {
    if (l.enabled && !l.dynamic) l.observer = make_observer(options_.observer, options_.percentile, "quantization.observer");
  }
  stage_ = QuantStage::kCalibrating;
}

void QuantPlan::finish_calibration(const Graph& graph) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& l = layers_[i];
    if (!l.enabled || l.dynamic || graph.nodes[i].kind == OpKind::kEmbedTokens) continue;
    XTRAIN_USAGE_CHECK(l.observer && !l.observer->empty(), "compress: layer '", graph.nodes[i].name,
                       "' saw no calibration data (--calibration-batches must be > 0)");
    l.act = l.observer->qparams();
  }
  stage_ = QuantStage::kFloat;
}

void QuantPlan::start_qat() {
  for (auto& l : layers_) {
    if (!l.enabled || l.dynamic || !l.observer) continue;
    auto ma = std::make_unique<MovingAverageMinMaxObserver>();
    const auto [lo, hi] = l.observer->range();
    ma->reset_to(lo, hi);
    l.observer = std::move(ma);
  }
  stage_ = QuantStage::kFakeQuant;
}

void QuantPlan::convert(const Graph& graph) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& l = layers_[i];
    const Node& n = graph.nodes[i];
    if (!l.enabled) continue;
    if (l.observer && !l.dynamic && n.kind != OpKind::kEmbedTokens) l.act = l.observer->qparams();
    if (n.kind == OpKind::kLinear) {
      l.linear = std::make_shared<Int8Linear>(n.weight, n.bias, l.act, l.dynamic, n.relu);
    } else if (n.kind == OpKind::kConv2d) {
      const auto [w, b] = folded_conv(n);
      l.conv = std::make_shared<Int8Conv2d>(w, b, n.stride, n.padding, l.act, n.relu);
    } else if (n.kind == OpKind::kEmbedTokens) {
      l.table = quantize_per_channel(n.weight);
      l.positions = quantize_per_channel(n.aux);
      l.table_f32 = dequantize_per_channel(l.table);
      l.positions_f32 = dequantize_per_channel(l.positions);
    }
  }
  stage_ = QuantStage::kConverted;
}

}  // namespace xtrain::compress
