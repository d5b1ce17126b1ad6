// trace(): reads the layer graph (graph.h) off a module tree. Knows the assemblies in models/
// (GPT, ResNet-18, MlpClassifier), torch::nn::Sequential stacks, and these layers: nn::Linear,
// nn::LayerNorm, nn::Block, nn::Mlp, nn::CausalSelfAttention, nn::MultiScaleAttention,
// torch::nn::Conv2d (+ a following BatchNorm2d), ReLU, GELU(tanh), Flatten, Dropout. Anything else
// is a UsageError naming the layer's path and class. Design choice: children are found by their
// registered names (what checkpoints use too), not by C++ members, so a model keeps its layout.
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/compress/graph/graph.h"

namespace xtrain::compress {

struct TraceHints {
  std::vector<int64_t> sample_shape;  // image / feature input: one sample's shape, e.g. {1, 28, 28}
  int64_t heads = 0;     // a standalone attention or Block: its NH (a GPT knows its own)
  int64_t seq_len = 0;   // ... and its longest T
  double dropout = 0.0;  // MlpClassifier keeps its dropout private: pass the config's
};

Graph trace(const torch::nn::Module& root, const TraceHints& hints = {});

// The module under `path` ("layer1.0.conv1"), or UsageError naming the path.
std::shared_ptr<torch::nn::Module> find_module(const torch::nn::Module& root, const std::string& path);

}  // namespace xtrain::compress
