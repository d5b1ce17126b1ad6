// Optimizers over flat fp32 buffers: Options (optim/options.h) + State (named flat tensors) +
// step. The caller owns the buffers and says which runs of them are which parameter (Segment), so
// the same kernels serve a whole model, one ZeRO partition, or an offloaded chunk. State is keyed
// by the position in the flat buffer, never by tensor address (it survives resharding).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/options.h"

namespace xtrain::optim {

// A contiguous run of the flat buffers holding one parameter, or the part of it this rank owns.
struct Segment {
  int64_t offset = 0;    // element offset into the flat buffers
  int64_t numel = 0;
  int group = 0;         // index into StepInputs::groups
  int64_t param_id = 0;  // stable id of the parameter (LAMB's trust ratio is per parameter)
};

struct GroupHyper {
  double lr = 0.0;
  double weight_decay = 0.0;
};

struct StepInputs {
  at::Tensor params;  // fp32, contiguous, 1-D: master weights, updated in place
  at::Tensor grads;   // contiguous, 1-D, same numel; fp32, bf16 or fp16; read only
  // Multiplies every gradient before use: unscaling (1/loss_scale) and clipping folded into one.
  double grad_scale = 1.0;
  // Optional: a bf16/fp16 flat copy of `params`, written from the updated values in the same pass.
  at::Tensor params_lowp;
  const std::vector<Segment>* segments = nullptr;  // sorted by offset, non-overlapping
  std::vector<GroupHyper> groups;
  // OneCycle momentum cycling: when set, overrides beta1/beta2 for this step (Adam/AdamW/Lamb).
  double beta1_override = -1.0;
  double beta2_override = -1.0;
  // LAMB under ZeRO: a parameter may be split over ranks. When set, called with the per-segment
  // partial squared norms [S, 2] (weights, updates) to sum them across ranks in place.
  std::function<void(at::Tensor&)> reduce_partial_norms;
  // Optimizers that re-evaluate the loss within a step (LBFGS; OptimizerEntry::needs_closure), as
  // torch's step(closure): evaluates the loss at the current `params`, leaves its final gradient in
  // `grads` and returns the loss. `loss` is the loss at `params` when the step began.
  std::function<double()> closure;
  double loss = 0.0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Allocates zeroed state for flat buffers of `numel` elements (called once, before step()).
  virtual void init_state(int64_t numel) = 0;
  virtual void step(const StepInputs& in) = 0;
  // Flat state tensors (each `numel` long), by name ("exp_avg", "exp_avg_sq", "momentum_buffer").
  virtual std::vector<std::pair<std::string, at::Tensor>> state() = 0;
  // Completed steps (Adam's bias correction uses it); restored from checkpoints.
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t n) { step_count_ = n; }

 protected:
  int64_t step_count_ = 0;
};

// The registered optimizer options.type names (optim/registry.h: "Adam", "AdamW", "Lamb", "SGD", or
// one added with register_optimizer), after the checks every optimizer relies on (lr and weight
// decay >= 0) and the entry's own; defined in registry.cpp.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options);

}  // namespace xtrain::optim
