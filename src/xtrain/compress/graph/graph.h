// The model as a graph of layers: what quantisation, structured pruning and the ONNX exporter all
// work on. A Graph is read off a module tree by trace() (graph/trace.h): one node per layer with
// handles to the module's own parameter tensors (no copies: training updates them in place), in
// execution order. Design choice: the graph describes the models we own (GPT, ResNet-18, MLP, ViT, and
// Sequential stacks of known layers) from their registered children, so compress and export need
// no hooks in models/; a layer the tracer does not know is an error that names it.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace xtrain::compress {

enum class OpKind {
  kEmbedTokens,  // int64 [B, T] -> wte[idx] + wpe[:T]       (weight = wte, aux = wpe)
  kLinear,       // [..., K] -> [..., N], weight [N, K], bias [N] or undefined
  kConv2d,       // [B, C, H, W] conv (+ BatchNorm2d folded at inference; bn_* tensors)
  kRelu,
  kGeluTanh,
  kAdd,          // two inputs
  kLayerNorm,    // over the last dim (weight, bias, eps)
  kAttention,    // fused qkv [B, T, 3C] -> [B, T, C]: heads, windows (empty: dense), causal
  kMeanHW,       // [B, C, H, W] -> [B, C]
  kFlatten,      // [B, ...] -> [B, features]
  kDropout,      // training only (p)
  // The Vision Transformer's (models/vit.h):
  kPatchify,       // [B, ch, gh·P, gw·P] -> [B, gh·gw, ch·P·P]: patches row-major, each (c, y, x) (patch)
  kTokensPos,      // [B, N, C] -> cat(class token, x) (aux = cls_token, or undefined: none) + pos (weight)
  kGridAttention,  // fused qkv [B, T, 3C] -> [B, T, C] over the patch grid (grid_h, grid_w, cls_token),
                   // bidirectional, dense (windows empty) or 2-D multi-scale
  kPoolTokens,     // [B, T, C] -> [B, C]: token 0 (cls_token) or the mean over the tokens
};
const char* op_name(OpKind kind);

struct Node {
  OpKind kind;
  std::string name;     // module path, e.g. "layer1.0.conv1", "blocks.2.attn.qkv"
  std::string op_type;  // NNI's op type: "Linear", "Conv2d", "Embedding", ... (config op_types)
  std::vector<int> inputs;
  int output = -1;
  at::Tensor weight, bias, aux;  // the module's own tensors
  bool relu = false;             // Linear / Conv2d: ReLU fused after
  // Conv2d geometry and its BatchNorm (undefined bn_weight: no BN)
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0};
  at::Tensor bn_weight, bn_bias, bn_mean, bn_var;
  double eps = 1e-5;  // BatchNorm / LayerNorm
  std::shared_ptr<torch::nn::Module> bn_module;  // runs BN in training mode (fp32 path)
  // Attention
  int64_t heads = 0;
  std::vector<int64_t> windows;
  bool causal = true;
  int64_t max_T = 0;  // dense: the mask size (seq_len)
  int64_t grid_h = 0, grid_w = 0;  // GridAttention / Patchify: the patch grid
  bool cls_token = false;          // GridAttention / PoolTokens: token 0 is a class token
  int64_t patch = 0;               // Patchify: P
  double p = 0.0;     // Dropout
};

struct Graph {
  std::vector<Node> nodes;
  int num_values = 1;  // value 0 is the input
  int output = 0;
  std::string input_kind;               // "tokens" (int64 [B, T]) | "image" ([B, C, H, W]) | "features"
  std::vector<int64_t> sample_shape;    // one sample's input shape (tokens: {T})
  std::string model_type;               // gpt | resnet18 | mlp | vit | sequential | <layer>
  bool is_quantizable(const Node& n) const { return n.kind == OpKind::kLinear || n.kind == OpKind::kConv2d; }
  // Indices of the nodes reading value v.
  std::vector<int> consumers(int value) const;
};

// Conv2d weight and bias with its BatchNorm folded in (eval statistics): W·γ/√(σ²+ε),
// β + (b − μ)·γ/√(σ²+ε). Without BN: the weight and the bias (zeros if none). Differentiable.
std::pair<at::Tensor, at::Tensor> folded_conv(const Node& n);

}  // namespace xtrain::compress
