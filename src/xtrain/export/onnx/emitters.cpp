// Emitters for embedding, Linear, Conv2d, norms, activations, the shape ops and the ViT's token ops.
#include "xtrain/export/onnx/emitters.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "xtrain/base/error.h"

namespace xtrain::onnx_export {

using compress::Node;
using compress::OpKind;

const compress::LayerQuant* EmitContext::quant(size_t node) const {
  if (plan == nullptr || plan->stage() != compress::QuantStage::kConverted) return nullptr;
  const auto& l = plan->at(node);
  return l.enabled ? &l : nullptr;
}

namespace {

const std::string& in(EmitContext& c, size_t i, int k = 0) { return c.values[c.graph.nodes[i].inputs[k]]; }

// Q → DQ of an activation with static qparams; dynamic layers quantise with the batch's own range
// in ONNX too (DynamicQuantizeLinear), which is what the int8 executor does.
std::string qdq_input(EmitContext& c, const std::string& x, const compress::LayerQuant& l, const std::string& name) {
  if (l.dynamic) {
    const auto q = c.b.node_n("DynamicQuantizeLinear", {x}, name + ".input_q", 3);  // y, scale, zero point
    return c.b.node("DequantizeLinear", {q[0], q[1], q[2]}, name + ".input_dq");
  }
  const auto s = c.b.scalar(name + ".input_scale", l.act.scale);
  const auto z = c.b.initializer(name + ".input_zero_point", at::full({}, l.act.zero_point, at::kByte));
  const auto q = c.b.node("QuantizeLinear", {x, s, z}, name + ".input_q");
  return c.b.node("DequantizeLinear", {q, s, z}, name + ".input_dq");
}

// DequantizeLinear of an int8 weight per channel along `axis`.
std::string dq_weight(EmitContext& c, const at::Tensor& q, const at::Tensor& scale, int64_t axis, const std::string& name) {
  const auto w = c.b.initializer(name + ".weight_int8", q);
  const auto s = c.b.initializer(name + ".weight_scale", scale.to(at::kFloat));
  const auto z = c.b.initializer(name + ".weight_zero_point", at::zeros({scale.size(0)}, at::kChar));
  return c.b.node("DequantizeLinear", {w, s, z}, name + ".weight", {{"axis", axis}});
}

std::string relu_if(EmitContext& c, const Node& n, const std::string& y) {
  return n.relu ? c.b.node("Relu", {y}, n.name + ".relu") : y;
}

std::string emit_embedding(EmitContext& c, size_t i) {
  const Node& n = c.graph.nodes[i];
  std::string table, positions;
  if (const auto* l = c.quant(i)) {
    table = dq_weight(c, l->table.q, l->table.scale, 0, "wte");
    positions = dq_weight(c, l->positions.q, l->positions.scale, 0, "wpe");
  } else {
    table = c.b.initializer("wte.weight", n.weight);
    positions = c.b.initializer("wpe.weight", n.aux);
  }
  const auto tok = c.b.node("Gather", {table, in(c, i)}, "wte.gather", {{"axis", int64_t{0}}});
  const auto pos = c.b.node("Slice", {positions, c.b.ints("zero1", {0}), c.seq_len, c.b.ints("axis0", {0})}, "wpe.slice");
  return c.b.node("Add", {tok, pos}, "embed");
}

std::string emit_linear(EmitContext& c, size_t i) {
  const Node& n = c.graph.nodes[i];
  std::string x = in(c, i), w;
  at::Tensor bias = n.bias;
  if (const auto* l = c.quant(i)) {
    x = qdq_input(c, x, *l, n.name);
    w = dq_weight(c, l->linear->weight().q.t(), l->linear->weight().scale, 1, n.name);  // W^T [K, N]: axis 1
    bias = l->linear->bias();
  } else {
    w = c.b.initializer(n.name + ".weight_t", n.weight.detach().t());
  }
  std::string y = c.b.node("MatMul", {x, w}, n.name + ".matmul");
  if (bias.defined()) y = c.b.node("Add", {y, c.b.initializer(n.name + ".bias", bias.detach())}, n.name);
  return relu_if(c, n, y);
}

std::string emit_conv(EmitContext& c, size_t i) {
  const Node& n = c.graph.nodes[i];
  std::string x = in(c, i), w;
  at::Tensor bias;
  if (const auto* l = c.quant(i)) {
    x = qdq_input(c, x, *l, n.name);
    w = dq_weight(c, l->conv->weight().q, l->conv->weight().scale, 0, n.name);
    bias = l->conv->bias();
  } else {
    at::NoGradGuard no_grad;
    const auto [fw, fb] = compress::folded_conv(n);  // BatchNorm folded (inference statistics)
    w = c.b.initializer(n.name + ".weight", fw);
    bias = fb;
  }
  const int64_t kh = n.weight.size(2), kw = n.weight.size(3);
  const std::vector<Attr> attrs = {{"kernel_shape", std::vector<int64_t>{kh, kw}},
                                   {"strides", std::vector<int64_t>{n.stride[0], n.stride[1]}},
                                   {"pads", std::vector<int64_t>{n.padding[0], n.padding[1], n.padding[0], n.padding[1]}}};
  const auto y = c.b.node("Conv", {x, w, c.b.initializer(n.name + ".bias", bias.detach())}, n.name, attrs);
  return relu_if(c, n, y);
}

std::string emit_gelu_tanh(EmitContext& c, size_t i) {
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): opset 17 has no Gelu.
  const std::string& x = in(c, i);
  const std::string& p = c.graph.nodes[i].name;
  const auto x3 = c.b.node("Mul", {c.b.node("Mul", {x, x}, p + ".x2"), x}, p + ".x3");
  const auto inner = c.b.node("Add", {x, c.b.node("Mul", {x3, c.b.scalar(p + ".c1", 0.044715f)}, p + ".cx3")}, p + ".sum");
  const auto t = c.b.node("Tanh", {c.b.node("Mul", {inner, c.b.scalar(p + ".c2", std::sqrt(2.0f / static_cast<float>(M_PI)))}, p + ".scaled")}, p + ".tanh");
  const auto one_plus = c.b.node("Add", {t, c.b.scalar(p + ".one", 1.0f)}, p + ".one_plus");
  return c.b.node("Mul", {c.b.node("Mul", {x, one_plus}, p + ".x_times"), c.b.scalar(p + ".half", 0.5f)}, p);
}

std::string emit_layer_norm(EmitContext& c, size_t i) {
  const Node& n = c.graph.nodes[i];
  return c.b.node("LayerNormalization",
                  {in(c, i), c.b.initializer(n.name + ".weight", n.weight.detach()),
                   c.b.initializer(n.name + ".bias", n.bias.detach())},
                  n.name, {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(n.eps)}});
}

std::string emit_relu(EmitContext& c, size_t i) { return c.b.node("Relu", {in(c, i)}, c.graph.nodes[i].name); }
std::string emit_add(EmitContext& c, size_t i) {
  return c.b.node("Add", {in(c, i, 0), in(c, i, 1)}, c.graph.nodes[i].name);
}
std::string emit_mean_hw(EmitContext& c, size_t i) {
  return c.b.node("ReduceMean", {in(c, i)}, c.graph.nodes[i].name,
                  {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{0}}});
}
std::string emit_flatten(EmitContext& c, size_t i) {
  return c.b.node("Flatten", {in(c, i)}, c.graph.nodes[i].name, {{"axis", int64_t{1}}});
}
std::string emit_dropout(EmitContext& c, size_t i) { return in(c, i); }  // inference: identity

// The ViT's: [B, ch, gh·P, gw·P] -> [B, gh, gw, ch, P, P] (a transpose of the 6-D view) -> [B, gh·gw, ch·P·P].
std::string emit_patchify(EmitContext& c, size_t i) {
  const Node& n = c.graph.nodes[i];
  const int64_t P = n.patch;
  const auto grid = c.b.node("Reshape", {in(c, i), c.b.ints(n.name + ".shape6", {0, -1, n.grid_h, P, n.grid_w, P})},
                             n.name + ".grid");
  const auto t = c.b.node("Transpose", {grid}, n.name + ".order", {{"perm", std::vector<int64_t>{0, 2, 4, 1, 3, 5}}});
  return c.b.node("Reshape", {t, c.b.ints(n.name + ".shape3", {0, n.grid_h * n.grid_w, -1})}, n.name);
}

// cat(class token expanded to [B, 1, C], x) along the tokens, + the position embeddings [1, T, C].
std::string emit_tokens_pos(EmitContext& c, size_t i) {
  const Node& n = c.graph.nodes[i];
  std::string x = in(c, i);
  if (n.aux.defined()) {
    const int64_t C = n.aux.size(-1);
    const auto batch = c.b.node("Slice", {c.b.node("Shape", {x}, n.name + ".x_shape"), c.b.ints(n.name + ".zero1", {0}),
                                          c.b.ints(n.name + ".one1", {1})},
                                n.name + ".batch");
    const auto shape = c.b.node("Concat", {batch, c.b.ints(n.name + ".tail", {1, C})}, n.name + ".cls_shape",
                                {{"axis", int64_t{0}}});
    const auto cls = c.b.node("Expand", {c.b.initializer("cls_token", n.aux.detach()), shape}, n.name + ".cls");
    x = c.b.node("Concat", {cls, x}, n.name + ".tokens", {{"axis", int64_t{1}}});
  }
  return c.b.node("Add", {x, c.b.initializer(n.name + ".weight", n.weight.detach())}, n.name);
}

// [B, T, C] -> [B, C]: token 0 (a class token) or the mean over the tokens.
std::string emit_pool_tokens(EmitContext& c, size_t i) {
  const Node& n = c.graph.nodes[i];
  if (n.cls_token) {
    return c.b.node("Gather", {in(c, i), c.b.initializer(n.name + ".index", at::full({}, 0, at::kLong))}, n.name,
                    {{"axis", int64_t{1}}});
  }
  return c.b.node("ReduceMean", {in(c, i)}, n.name, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
}

}  // namespace

Emitter emitter_for(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbedTokens: return &emit_embedding;
    case OpKind::kLinear: return &emit_linear;
    case OpKind::kConv2d: return &emit_conv;
    case OpKind::kRelu: return &emit_relu;
    case OpKind::kGeluTanh: return &emit_gelu_tanh;
    case OpKind::kAdd: return &emit_add;
    case OpKind::kLayerNorm: return &emit_layer_norm;
    case OpKind::kAttention: return &emit_attention;
    case OpKind::kMeanHW: return &emit_mean_hw;
    case OpKind::kFlatten: return &emit_flatten;
    case OpKind::kDropout: return &emit_dropout;
    case OpKind::kPatchify: return &emit_patchify;
    case OpKind::kTokensPos: return &emit_tokens_pos;
    case OpKind::kGridAttention: return &emit_grid_attention;
    case OpKind::kPoolTokens: return &emit_pool_tokens;
  }
  TORCH_CHECK(false, "export: no emitter for ", compress::op_name(kind));
}

}  // namespace xtrain::onnx_export
