// export_onnx: graph inputs and outputs, then each node's emitter in execution order.
#include "xtrain/export/onnx/onnx_export.h"

#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/compress/quant/quant_plan.h"
#include "xtrain/export/onnx/emitters.h"

namespace xtrain::onnx_export {

namespace {

bool has_multiscale(const compress::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n.kind == compress::OpKind::kAttention && !n.windows.empty()) return true;
  }
  return false;
}

std::vector<Dim> input_dims(const compress::Graph& g, int64_t fixed_T) {
  std::vector<Dim> dims = {std::string("batch")};
  if (g.input_kind == "tokens") {
    dims.push_back(fixed_T > 0 ? Dim(fixed_T) : Dim(std::string("T")));
    return dims;
  }
  std::vector<int64_t> shape = g.sample_shape;
  if (shape.empty() && !g.nodes.empty() && g.nodes.front().kind == compress::OpKind::kLinear) {
    shape = {g.nodes.front().weight.size(1)};
  }
  XTRAIN_USAGE_CHECK(!shape.empty(), "export: the input's sample shape is unknown (TraceHints.sample_shape)");
  for (int64_t d : shape) dims.push_back(d);
  return dims;
}

std::string to_string(const Dim& d) {
  return std::holds_alternative<int64_t>(d) ? std::to_string(std::get<int64_t>(d)) : std::get<std::string>(d);
}

}  // namespace

ExportReport export_onnx(const compress::Graph& graph, const compress::QuantPlan* plan, const std::string& path,
                         const ExportOptions& o) {
  XTRAIN_USAGE_CHECK(!o.int8 || (plan && plan->stage() == compress::QuantStage::kConverted),
                     "export: --int8 needs a quantised model (run `xtrain compress` with a quantization section, or ",
                     "let export calibrate one)");
  OnnxBuilder b(o.graph_name, o.opset, o.ir_version);
  const bool tokens = graph.input_kind == "tokens";
  // Multi-scale attention's pooling tables are built for one T: the sample's first dim (tokens {T},
  // or a standalone attention stack's features {T, C}).
  const bool seq_input = tokens || graph.sample_shape.size() == 2;
  const int64_t fixed_T = seq_input && has_multiscale(graph) && !graph.sample_shape.empty() ? graph.sample_shape[0] : 0;
  const auto dims = input_dims(graph, fixed_T);
  ExportReport r;
  r.input_name = tokens ? "idx" : "input";
  r.output_name = "logits";
  b.input(r.input_name, tokens ? at::kLong : at::kFloat, dims);
  EmitContext ctx{b, graph, o.int8 ? plan : nullptr, std::vector<std::string>(graph.num_values), "", fixed_T};
  ctx.values[0] = r.input_name;
  if (tokens) {
    const auto shape = b.node("Shape", {r.input_name}, "input_shape");
    ctx.seq_len = b.node("Slice", {shape, b.ints("one", {1}), b.ints("two", {2})}, "seq_len");
  }
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ctx.values[graph.nodes[i].output] = emitter_for(graph.nodes[i].kind)(ctx, i);
    if (ctx.quant(i)) r.quantized_layers++;
  }
  const auto& last = graph.nodes.back();
  const int64_t classes = last.kind == compress::OpKind::kLinear ? last.weight.size(0) : -1;
  // The output keeps the input's leading dims unless the graph flattens or pools them away
  // (Linear, attention and the element-wise ops act on the last dim only).
  bool reduces = false;
  for (const auto& n : graph.nodes) {
    reduces |= n.kind == compress::OpKind::kFlatten || n.kind == compress::OpKind::kMeanHW ||
               n.kind == compress::OpKind::kPoolTokens;
  }
  std::vector<Dim> out_dims = {dims[0]};
  if (tokens) {
    out_dims.push_back(dims[1]);
  } else if (!reduces) {
    out_dims.insert(out_dims.end(), dims.begin() + 1, dims.end() - 1);
  }
  out_dims.push_back(classes > 0 ? Dim(classes) : Dim(std::string("features")));
  b.mark_output(ctx.values[graph.output], r.output_name, at::kFloat, out_dims);
  b.save(path);
  r.path = path;
  r.nodes = b.num_nodes();
  r.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  for (const auto& d : dims) r.input_dims.push_back(to_string(d));
  return r;
}

}  // namespace xtrain::onnx_export
