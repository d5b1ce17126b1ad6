// Pruning targets from a config list in NNI's style: each entry selects layers by `op_types`
// (Linear, Conv2d) and/or `op_names` (module paths) and gives them a `sparsity` (per layer,
// NNI's sparsity_per_layer) or a `total_sparsity` (one magnitude threshold shared by the entry's
// layers: global pruning); `"exclude": true` keeps layers dense. Later entries override earlier
// ones for the same layer, as in NNI. The resolved list names every layer with its sparsity.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "xtrain/compress/graph/graph.h"
#include "xtrain/compress/options.h"

namespace xtrain::compress {

struct PruneTarget {
  int node = -1;            // index into Graph::nodes
  std::string name;
  at::Tensor weight;        // the module's own weight
  double sparsity = 0.0;    // the final sparsity of this layer (or of its group)
  int group = -1;           // >= 0: global group (rule index) sharing one threshold
};

// UsageError naming the entry and key for a bad value, an unknown op type or a missing layer.
std::vector<PruneTarget> resolve_targets(const Graph& graph, const std::vector<PruneRule>& rules);

}  // namespace xtrain::compress
