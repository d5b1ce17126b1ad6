// The interpreter: values in a vector, each freed after its last reader; one function per op in
// float, and the quantised variants of Linear, Conv2d and the token embedding.
#include "xtrain/compress/graph/executor.h"

#include <ATen/Functions.h>
#include <torch/nn/modules/batchnorm.h>

#include "xtrain/base/error.h"
#include "xtrain/compress/quant/fake_quant.h"
#include "xtrain/compress/quant/quant_plan.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/linear.h"
#include "xtrain/models/vit.h"

namespace xtrain::compress {

namespace {

at::Tensor maybe_relu(const Node& n, at::Tensor y) { return n.relu ? at::relu(y) : y; }

// The fused qkv [B, T, 3C] as q, k, v [B, NH, T, HS] (select 0, 1, 2 of the result), and back.
at::Tensor split_heads(const at::Tensor& qkv, int64_t NH) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  return qkv.view({B, T, 3, NH, C / NH}).permute({2, 0, 3, 1, 4});
}
at::Tensor merge_heads(const at::Tensor& y) {  // [B, NH, T, HS] -> [B, T, NH·HS]
  return y.transpose(1, 2).reshape({y.size(0), y.size(2), y.size(1) * y.size(3)});
}

at::Tensor attention(const Node& n, const at::Tensor& qkv) {
  TORCH_CHECK(n.max_T <= 0 || qkv.size(1) <= n.max_T, "compress: '", n.name, "' got T=", qkv.size(1), " > seq_len ",
              n.max_T);
  const auto h = split_heads(qkv, n.heads);
  return merge_heads(kernels::attention::run_attention(h.select(0, 0), h.select(0, 1), h.select(0, 2), n.causal,
                                                       n.windows, 0.0, "auto"));
}

// GridAttention: the same kernel call as nn::GridAttention's forward (run_attention_2d, "auto").
at::Tensor grid_attention(const Node& n, const at::Tensor& qkv) {
  const auto h = split_heads(qkv, n.heads);
  return merge_heads(kernels::attention::run_attention_2d(h.select(0, 0), h.select(0, 1), h.select(0, 2), n.windows,
                                                          n.grid_h, n.grid_w, n.cls_token, 0.0, "auto"));
}

at::Tensor patchify(const Node& n, const at::Tensor& x) {
  const int64_t P = n.patch, gh = n.grid_h, gw = n.grid_w;
  TORCH_CHECK(x.dim() == 4 && x.size(2) == gh * P && x.size(3) == gw * P, "compress: '", n.name, "' expects images [B, ",
              x.size(1), ", ", gh * P, ", ", gw * P, "], got ", x.sizes());
  return models::patchify(x, gh, gw, P);
}

at::Tensor tokens_pos(const Node& n, const at::Tensor& x) {
  if (!n.aux.defined()) return x + n.weight;
  return at::cat({n.aux.expand({x.size(0), 1, x.size(2)}), x}, 1) + n.weight;
}

at::Tensor conv_float(const Node& n, const at::Tensor& x, bool training) {
  auto y = at::conv2d(x, n.weight, n.bias, {n.stride[0], n.stride[1]}, {n.padding[0], n.padding[1]});
  if (n.bn_module) {
    auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(n.bn_module.get());
    TORCH_INTERNAL_ASSERT(bn != nullptr);
    y = bn->forward(y);  // the module's own mode: training statistics only when it is in train()
  }
  return maybe_relu(n, y);
}

// Fake-quantised weight: int8 per output channel, scale from the current weights.
at::Tensor fq_weight(const at::Tensor& w) {
  const auto amax = w.detach().reshape({w.size(0), -1}).abs().amax(1);
  return fake_quantize_per_channel(w, symmetric_scales(amax), kS8Min, kS8Max);
}

at::Tensor fq_input(LayerQuant& l, const at::Tensor& x, bool training) {
  if (training && l.observer) {
    l.observer->observe(x);
    l.act = l.observer->qparams();
  }
  return fake_quantize_per_tensor(x, l.act.scale, l.act.zero_point, kU8Min, kU8Max);
}

at::Tensor quantised_node(const Node& n, LayerQuant& l, QuantStage stage, const at::Tensor& x, bool training) {
  if (stage == QuantStage::kCalibrating && l.observer && n.kind != OpKind::kEmbedTokens) l.observer->observe(x);
  if (stage == QuantStage::kConverted) {
    if (n.kind == OpKind::kLinear) return l.linear->forward(x);
    if (n.kind == OpKind::kConv2d) return l.conv->forward(x);
    const int64_t T = x.size(1);
    return at::embedding(l.table_f32, x) + l.positions_f32.narrow(0, 0, T);
  }
  if (stage == QuantStage::kFakeQuant) {
    if (n.kind == OpKind::kEmbedTokens) {
      return at::embedding(fq_weight(n.weight), x) + fq_weight(n.aux).narrow(0, 0, x.size(1));
    }
    const auto xq = l.dynamic ? x : fq_input(l, x, training);
    if (n.kind == OpKind::kLinear) return maybe_relu(n, kernels::linear(xq, fq_weight(n.weight), n.bias));
    const auto [w, b] = folded_conv(n);  // BatchNorm folded with its running statistics (frozen)
    return maybe_relu(n, at::conv2d(xq, fq_weight(w), b, {n.stride[0], n.stride[1]}, {n.padding[0], n.padding[1]}));
  }
  return at::Tensor();  // float: the caller runs the plain op
}

at::Tensor float_node(const Node& n, const std::vector<at::Tensor>& in, bool training) {
  const at::Tensor& x = in[0];
  switch (n.kind) {
    case OpKind::kEmbedTokens: return at::embedding(n.weight, x) + n.aux.narrow(0, 0, x.size(1));
    case OpKind::kLinear: return maybe_relu(n, kernels::linear(x, n.weight, n.bias));
    case OpKind::kConv2d: return conv_float(n, x, training);
    case OpKind::kRelu: return at::relu(x);
    case OpKind::kGeluTanh: return kernels::gelu_tanh(x);
    case OpKind::kAdd: return in[0] + in[1];
    case OpKind::kLayerNorm: return at::layer_norm(x, {x.size(-1)}, n.weight, n.bias, n.eps);
    case OpKind::kAttention: return attention(n, x);
    case OpKind::kMeanHW: return x.mean({2, 3});
    case OpKind::kFlatten: return x.reshape({x.size(0), -1});
    case OpKind::kDropout: return training ? at::dropout(x, n.p, true) : x;
    case OpKind::kPatchify: return patchify(n, x);
    case OpKind::kTokensPos: return tokens_pos(n, x);
    case OpKind::kGridAttention: return grid_attention(n, x);
    case OpKind::kPoolTokens: return n.cls_token ? x.select(1, 0) : x.mean(1);
  }
  TORCH_INTERNAL_ASSERT(false, "compress: unknown op");
}

}  // namespace

at::Tensor run_graph(const Graph& graph, const at::Tensor& input, QuantPlan* plan, bool training) {
  std::vector<int> last_use(graph.num_values, -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (int v : graph.nodes[i].inputs) last_use[v] = static_cast<int>(i);
  }
  std::vector<at::Tensor> values(graph.num_values);
  values[0] = input;
  const QuantStage stage = plan ? plan->stage() : QuantStage::kFloat;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    std::vector<at::Tensor> in;
    for (int v : n.inputs) in.push_back(values[v]);
    at::Tensor out;
    if (plan && plan->at(i).enabled && stage != QuantStage::kFloat) {
      out = quantised_node(n, plan->at(i), stage, in[0], training);
    }
    if (!out.defined()) out = float_node(n, in, training);
    values[n.output] = out;
    for (int v : n.inputs) {
      if (last_use[v] == static_cast<int>(i) && v != graph.output) values[v] = at::Tensor();
    }
  }
  return values[graph.output];
}

}  // namespace xtrain::compress
