// Partitioners; see partition.h. The balanced split binary-searches the bottleneck (largest stage
// weight) with a greedy feasibility probe, as DeepSpeed's partition_balanced does.
#include "xtrain/parallel/pipeline/partition.h"

#include <algorithm>
#include <numeric>

#include "xtrain/base/error.h"

namespace xtrain::parallel::pipeline {
namespace {

// Greedy contiguous split with every part's weight <= limit; the boundaries, or {} if more than
// num_parts parts are needed.
std::vector<int> greedy(const std::vector<int64_t>& w, int num_parts, int64_t limit) {
  std::vector<int> bounds{0};
  int64_t sum = 0;
  for (int i = 0; i < static_cast<int>(w.size()); ++i) {
    if (w[i] > limit) return {};
    if (sum + w[i] > limit) {
      bounds.push_back(i);
      sum = 0;
    }
    sum += w[i];
  }
  bounds.push_back(static_cast<int>(w.size()));
  if (static_cast<int>(bounds.size()) - 1 > num_parts) return {};
  return bounds;
}

}  // namespace

std::vector<int> partition_uniform(int num_items, int num_parts) {
  XTRAIN_USAGE_CHECK(num_parts >= 1, "pipeline: number of stages must be >= 1, got ", num_parts);
  XTRAIN_USAGE_CHECK(num_items >= 0, "pipeline: number of layers must be >= 0, got ", num_items);
  std::vector<int> bounds(num_parts + 1, 0);
  const int chunk = num_items / num_parts, residual = num_items % num_parts;
  for (int p = 1; p <= num_parts; ++p) bounds[p] = bounds[p - 1] + chunk + (p <= residual ? 1 : 0);
  return bounds;
}

std::vector<int> partition_balanced(const std::vector<int64_t>& weights, int num_parts) {
  XTRAIN_USAGE_CHECK(num_parts >= 1, "pipeline: number of stages must be >= 1, got ", num_parts);
  for (size_t i = 0; i < weights.size(); ++i)
    XTRAIN_USAGE_CHECK(weights[i] >= 0, "pipeline: layer ", i, " has a negative weight ", weights[i]);
  const int n = static_cast<int>(weights.size());
  if (n <= num_parts) return partition_uniform(n, num_parts);
  int64_t lo = *std::max_element(weights.begin(), weights.end());
  int64_t hi = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  while (lo < hi) {  // smallest feasible bottleneck
    const int64_t mid = lo + (hi - lo) / 2;
    if (greedy(weights, num_parts, mid).empty()) lo = mid + 1; else hi = mid;
  }
  auto bounds = greedy(weights, num_parts, lo);
  // Fewer parts than stages: split the last multi-layer part (weights are >= 0, so the bottleneck
  // does not grow) until every stage has a layer.
  while (static_cast<int>(bounds.size()) - 1 < num_parts) {
    for (int p = static_cast<int>(bounds.size()) - 2; p >= 0; --p) {
      if (bounds[p + 1] - bounds[p] >= 2) {
        bounds.insert(bounds.begin() + p + 1, bounds[p + 1] - 1);
        break;
      }
    }
  }
  return bounds;
}

std::vector<int> partition_layers(const std::vector<int64_t>& weights, int num_parts, const std::string& method) {
  if (method == "uniform") return partition_uniform(static_cast<int>(weights.size()), num_parts);
  if (method == "parameters") return partition_balanced(weights, num_parts);
  XTRAIN_USAGE_ERROR("pipeline: partition_method must be \"uniform\" or \"parameters\", got \"", method,
                     "\" (pipeline.partition_method)");
}

}  // namespace xtrain::parallel::pipeline
