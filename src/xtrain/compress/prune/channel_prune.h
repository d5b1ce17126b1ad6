// Structured channel pruning (Li et al. 2017, "Pruning Filters for Efficient ConvNets"; NNI's
// L1NormPruner / L2NormPruner): a target layer keeps its output channels with the largest L1 (or
// L2) weight norms, and the layers are physically shrunk: the producer's weight rows, bias and
// BatchNorm entries, and the consumer's input channels. Design choice: the graph decides what is
// safe: a producer qualifies when its output reaches exactly one Linear/Conv2d consumer through
// element-wise ops only (ReLU, GELU, Dropout) — residual adds, attention heads and the model's
// output are left whole (reported as skipped), so the pruned model computes exactly what the
// original computes with those channels removed.
#pragma once
#include <string>
#include <vector>

#include "xtrain/compress/graph/graph.h"
#include "xtrain/compress/prune/prune_config.h"

namespace xtrain::compress {

struct ChannelPruneReport {
  struct Layer {
    std::string name, consumer;
    int64_t before = 0, after = 0;
  };
  std::vector<Layer> pruned;
  std::vector<std::string> skipped;  // "name: why"
};

// The channels `target` keeps (ascending indices) under norm p (1 or 2).
std::vector<int64_t> channels_to_keep(const at::Tensor& weight, double sparsity, int p);

// Shrinks the model in place (parameters change shape through set_data; module options follow).
// `root` is the traced module (its Conv2d/BatchNorm2d options are updated). Call before an
// Engine or optimizer sees the parameters. The graph stays valid (same tensors, new shapes).
ChannelPruneReport prune_channels(torch::nn::Module& root, const Graph& graph,
                                  const std::vector<PruneTarget>& targets, int p);

// The consumer node of `node`'s output channels, or -1 with `why` filled (helper for tests).
int channel_consumer(const Graph& graph, int node, std::string* why);

}  // namespace xtrain::compress
