// One emitter per graph op: each appends the ONNX nodes for one compress::Node and returns the name
// of its output value. Quantised layers (a converted QuantPlan) are written in QDQ form:
// QuantizeLinear → DequantizeLinear on the input activation (uint8, per tensor) and
// DequantizeLinear on the int8 weight (per output channel), then the float op, which is what the
// int8 executor computes. Internal to export/onnx.
#pragma once
#include <string>
#include <vector>

#include "xtrain/compress/graph/graph.h"
#include "xtrain/compress/quant/quant_plan.h"
#include "xtrain/export/onnx/onnx_builder.h"

namespace xtrain::onnx_export {

struct EmitContext {
  OnnxBuilder& b;
  const compress::Graph& graph;
  const compress::QuantPlan* plan;  // converted, or null (float export)
  std::vector<std::string> values;  // graph value -> ONNX name
  std::string seq_len;              // tokens: a [1] int64 tensor holding T (dynamic), else ""
  int64_t fixed_T = 0;              // multi-scale attention: the exported T
  const compress::LayerQuant* quant(size_t node) const;  // the converted layer, or null
};

using Emitter = std::string (*)(EmitContext& ctx, size_t node);
Emitter emitter_for(compress::OpKind kind);

// The attention core of emitters: q·kᵀ/√HS (+ causal mask or multi-scale pooling and bias),
// Softmax, ·v, from the fused qkv value [B, T, 3C] to [B, T, C].
std::string emit_attention(EmitContext& ctx, size_t node);
// The same for GridAttention: bidirectional, dense or 2-D multi-scale over the node's fixed grid.
std::string emit_grid_attention(EmitContext& ctx, size_t node);

}  // namespace xtrain::onnx_export
