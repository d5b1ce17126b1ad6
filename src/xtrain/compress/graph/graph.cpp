// Graph helpers: op names, consumers, BatchNorm folding.
#include "xtrain/compress/graph/graph.h"

#include <ATen/Functions.h>

namespace xtrain::compress {

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbedTokens: return "Embedding";
    case OpKind::kLinear: return "Linear";
    case OpKind::kConv2d: return "Conv2d";
    case OpKind::kRelu: return "ReLU";
    case OpKind::kGeluTanh: return "GELU";
    case OpKind::kAdd: return "Add";
    case OpKind::kLayerNorm: return "LayerNorm";
    case OpKind::kAttention: return "Attention";
    case OpKind::kMeanHW: return "AdaptiveAvgPool2d";
    case OpKind::kFlatten: return "Flatten";
    case OpKind::kDropout: return "Dropout";
    case OpKind::kPatchify: return "Patchify";
    case OpKind::kTokensPos: return "TokensPos";
    case OpKind::kGridAttention: return "GridAttention";
    case OpKind::kPoolTokens: return "PoolTokens";
  }
  return "?";
}

std::vector<int> Graph::consumers(int value) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int in : nodes[i].inputs) {
      if (in == value) {
        out.push_back(static_cast<int>(i));
        break;
      }
    }
  }
  return out;
}

std::pair<at::Tensor, at::Tensor> folded_conv(const Node& n) {
  const int64_t C = n.weight.size(0);
  at::Tensor bias = n.bias.defined() ? n.bias : at::zeros({C}, n.weight.options());
  if (!n.bn_weight.defined()) return {n.weight, bias};
  const auto factor = n.bn_weight * at::rsqrt(n.bn_var + n.eps);  // γ/√(σ²+ε), [C]
  return {n.weight * factor.view({C, 1, 1, 1}), n.bn_bias + (bias - n.bn_mean) * factor};
}

}  // namespace xtrain::compress
