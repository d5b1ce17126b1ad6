// PipelineExecutor: runs one stage's Schedule (schedule.h) over the pipeline group, where group rank
// = stage. Activations go forward and gradients backward with Communicator send/recv (Gloo: CPU
// tensors); an activation is preceded by a small int64 header (dtype, ndim, sizes) so stages need
// not know each other's shapes; a gradient has its activation's shape. Sends are asynchronous and
// waited for at the end of run(). Parameter gradients accumulate over micro-batches (the caller
// zeroes them); the last stage divides each micro-batch loss by m, so the gradients and the
// returned loss are those of the mean over micro-batches (DeepSpeed's PipelineEngine). The loss may
// be of any floating dtype and already scaled (a LossFn that multiplies by the loss scale): the
// returned value is then the scaled mean, in the loss's dtype.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/pipeline/schedule.h"

namespace xtrain::parallel::pipeline {

using StageFn = std::function<at::Tensor(const at::Tensor&)>;
using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;

// Called around each kBackward action's autograd call on this stage, e.g. to let a data-parallel
// reducer skip or start its all-reduce (DeepSpeed's is_gradient_accumulation_boundary). last: this
// is the run's final backward on this stage. Empty functions are not called.
struct BackwardHooks {
  std::function<void(int micro_batch, bool last)> before_backward, after_backward;
};

struct PipelineStats {
  int max_in_flight = 0;   // activations held at once
  double busy_s = 0;       // time in forward and backward
  double total_s = 0;      // the whole run()
};

class PipelineExecutor {
 public:
  // comm: the pipeline group (nullptr or size 1 = a single stage). loss: used on the last stage.
  // on_step: called at kOptimizerStep (may be empty; the caller may step after run() instead).
  PipelineExecutor(StageFn stage, std::shared_ptr<comm::Communicator> comm, LossFn loss,
                   std::function<void()> on_step = {});

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  void set_backward_hooks(BackwardHooks hooks) { hooks_ = std::move(hooks); }

  // inputs: the m micro-batches (read on the first stage only); targets: the m targets (read on
  // the last stage only). Returns the mean loss on the last stage, an undefined tensor elsewhere.
  at::Tensor run(const Schedule& schedule, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets);

  const PipelineStats& stats() const { return stats_; }

 private:
  void send_activation(const at::Tensor& t);
  at::Tensor recv_activation();

  StageFn fn_;
  std::shared_ptr<comm::Communicator> comm_;
  LossFn loss_;
  std::function<void()> on_step_;
  BackwardHooks hooks_;
  int stage_ = 0, stages_ = 1;
  PipelineStats stats_;
  std::vector<comm::Work> sends_;  // in flight; a Work keeps its tensor referenced
};

}  // namespace xtrain::parallel::pipeline
