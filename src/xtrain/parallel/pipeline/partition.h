// Splitting a sequence of layers into pipeline stages, as DeepSpeed's PipelineModule
// partition_method: "uniform" (equal layer counts, the first num_items % parts stages one more:
// ds_utils.partition_uniform) and "parameters" (contiguous stages minimising the largest stage's
// parameter count: ds_utils.partition_balanced). Pure arithmetic; returns p+1 boundaries, stage s
// owning layers [bounds[s], bounds[s+1]).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::parallel::pipeline {

std::vector<int> partition_uniform(int num_items, int num_parts);
// weights: one non-negative cost per layer (its parameter count). Every stage gets at least one
// layer when there are at least as many layers as stages.
std::vector<int> partition_balanced(const std::vector<int64_t>& weights, int num_parts);
// method: "uniform" or "parameters" (DeepSpeed's names); weights are used by "parameters" only.
std::vector<int> partition_layers(const std::vector<int64_t>& weights, int num_parts, const std::string& method);

}  // namespace xtrain::parallel::pipeline
