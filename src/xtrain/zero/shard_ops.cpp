#include "xtrain/zero/shard_ops.h"

#include <ATen/Functions.h>

#include "xtrain/comm/communicator.h"

namespace xtrain::zero {

double shard_grad_norm_squared(const at::Tensor& part_grad, comm::Communicator& dp) {
  auto n = part_grad.to(at::kFloat).norm().to(at::kDouble).pow(2).reshape({1});
  if (dp.distributed()) dp.all_reduce(n, comm::ReduceOp::kSum);
  return n.item<double>();
}

optim::StepInputs shard_step_inputs(const at::Tensor& master, const at::Tensor& part_grad,
                                    const std::vector<optim::Segment>& segments, const StepHyper& hyper) {
  optim::StepInputs in;
  in.params = master;
  in.grads = part_grad;
  in.grad_scale = hyper.grad_scale;
  in.segments = &segments;
  in.groups = hyper.groups;
  in.beta1_override = hyper.beta1_override;
  in.beta2_override = hyper.beta2_override;
  return in;
}

}  // namespace xtrain::zero
