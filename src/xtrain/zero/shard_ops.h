// The two steps stages 1-3 share once this rank's reduced gradients are in its shard buffer.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "xtrain/optim/optimizer.h"
#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::comm {
class Communicator;
}

namespace xtrain::zero {

// Bytes a tensor holds (0 when undefined): memory accounting.
inline int64_t tensor_bytes(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

// Elements of a rank's gradient buffer whose parameter has a norm weight other than 1.
struct WeightedRange {
  int64_t offset = 0, numel = 0;
  double weight = 1.0;
};
// In the full flat buffer (stage 0) / in `rank`'s shard buffer (stages 1-3).
std::vector<WeightedRange> weighted_ranges(const FlatLayout& layout, const std::map<std::string, double>& weights);
std::vector<WeightedRange> weighted_ranges(const ShardLayout& layout, int64_t rank,
                                           const std::map<std::string, double>& weights);
// ||grad||² with each range's elements weighted (inf/NaN propagate).
double weighted_norm_squared(const at::Tensor& grad, const std::vector<WeightedRange>& ranges);

// The weighted squared norm of every rank's shard of reduced gradients, summed over the group.
double shard_grad_norm_squared(const at::Tensor& part_grad, const std::vector<WeightedRange>& ranges,
                               comm::Communicator& dp);

// The optimizer's inputs for this rank's shard: `master` (undefined when the state is on NVMe),
// the reduced gradients, their segments and the step's hyperparameters.
optim::StepInputs shard_step_inputs(const at::Tensor& master, const at::Tensor& part_grad,
                                    const std::vector<optim::Segment>& segments, const StepHyper& hyper);

}  // namespace xtrain::zero
