// The two steps stages 1-3 share once this rank's reduced gradients are in its shard buffer.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "xtrain/optim/optimizer.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::comm {
class Communicator;
}

namespace xtrain::zero {

// Squared norm of every rank's shard of reduced gradients, summed over the group (inf/NaN propagate).
double shard_grad_norm_squared(const at::Tensor& part_grad, comm::Communicator& dp);

// The optimizer's inputs for this rank's shard: `master` (undefined when the state is on NVMe),
// the reduced gradients, their segments and the step's hyperparameters.
optim::StepInputs shard_step_inputs(const at::Tensor& master, const at::Tensor& part_grad,
                                    const std::vector<optim::Segment>& segments, const StepHyper& hyper);

}  // namespace xtrain::zero
