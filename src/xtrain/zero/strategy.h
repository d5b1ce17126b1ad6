// How the model state is laid out, reduced and updated across data-parallel ranks. Stage 0
// (replicated.h): every rank holds everything and gradients are all-reduced in buckets; stages
// 1-3 partition the optimizer state, the gradients and the parameters (ZeRO, shared/design/zero.md).
// The Engine drives a Strategy through the fixed step sequence — scale → backward → reduce →
// unscale/check → clip → step → gather — and never looks inside; zero/ never sees the precision
// policy or the loss scaler (the engine passes dtypes and one gradient multiplier).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/optim/optimizer.h"
#include "xtrain/optim/options.h"
#include "xtrain/optim/param_groups.h"
#include "xtrain/zero/flat_layout.h"
#include "xtrain/zero/options.h"

namespace torch::nn {
class Module;
}
namespace xtrain::comm {
class Communicator;
}
namespace xtrain::checkpoint {
class CheckpointWriter;
class CheckpointReader;
}

namespace xtrain::zero {

struct StrategyOptions {
  c10::ScalarType param_dtype = c10::kFloat;       // what the model's parameters hold
  c10::ScalarType grad_accum_dtype = c10::kFloat;  // accumulation across micro-batches (mixed precision)
  int64_t gradient_accumulation_steps = 1;
  ZeroOptions zero;  // stage, buckets, overlap, offload, stage-3 knobs
  AioOptions aio;
  optim::OptimizerOptions optimizer;
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  // communication_data_type: gradients are cast to it for the data-parallel sum and back after
  // (zero/grad_reduce.h); Undefined (the key unset): they travel in their accumulation dtype.
  at::ScalarType communication_dtype = at::ScalarType::Undefined;
  bool allow_untested_optimizer = false;
  int64_t alignment = 16;  // elements; partitions are multiples of this
  // Model parallelism: a parameter held identically by k ranks of the model-parallel group (a
  // LayerNorm under tensor parallelism, a tied embedding on two pipeline stages) has weight 1/k in
  // grad_norm_squared(), so the sum over that group counts it once. Absent names weigh 1.
  std::map<std::string, double> norm_weights;
  // Each parameter's group (optim/param_groups.h): an index into StepHyper::groups.
  optim::ParamGroupOf param_group;
};

// What one optimizer step needs besides the gradients.
struct StepHyper {
  std::vector<optim::GroupHyper> groups;  // per parameter group (StrategyOptions::param_group)
  double grad_scale = 1.0;                // multiplies the reduced gradients (unscale and clip in one)
  double beta1_override = -1.0, beta2_override = -1.0;
  // Optimizers that re-run the loss within the step (optim::StepInputs::closure and loss; stage 0).
  std::function<double()> closure;
  double loss = 0.0;
};

// Model-state bytes on this rank (the ZeRO paper's accounting), in memory and on disk.
struct MemoryReport {
  int64_t param_bytes = 0;      // the model's (low-precision or fp32) parameters resident
  int64_t grad_bytes = 0;       // gradient buffers kept across the step (partition for stage >= 2)
  int64_t master_bytes = 0;     // fp32 master weights (0 when they are the parameters themselves)
  int64_t optimizer_bytes = 0;  // optimizer state in memory
  int64_t disk_bytes = 0;       // offloaded to NVMe
  int64_t total() const { return param_bytes + grad_bytes + master_bytes + optimizer_bytes; }
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string describe() const = 0;
  virtual const FlatLayout& layout() const = 0;

  // Around each micro-batch's autograd backward; `boundary`: the last micro-batch of the step.
  virtual void before_backward(bool boundary) = 0;
  virtual void after_backward(bool boundary) = 0;

  // At the boundary, in this order. reduce(): the gradients this rank updates are final (the mean
  // over data-parallel ranks). grad_norm_squared(): of all reduced gradients of the model, summed
  // over data-parallel ranks, each parameter weighted by StrategyOptions::norm_weights (inf/NaN
  // propagate: the loss scaler's overflow check). step(): the optimizer on this
  // rank's state, then the model's parameters are brought up to date on every rank.
  virtual void reduce() = 0;
  virtual double grad_norm_squared() = 0;
  virtual void step(const StepHyper& hyper) = 0;
  virtual void zero_grads() = 0;

  virtual std::string optimizer_name() const = 0;
  virtual int64_t optimizer_step_count() const = 0;
  virtual void set_optimizer_step_count(int64_t n) = 0;

  // Every rank calls save(); tensors are keyed by parameter name (and, for partitions, by the
  // element range they hold), so load() can reshard a checkpoint written at another world size.
  virtual void save(checkpoint::CheckpointWriter& writer) const = 0;
  virtual void load(const checkpoint::CheckpointReader& reader, bool load_optimizer) = 0;

  virtual MemoryReport memory() const = 0;

  // Every parameter whole, by name (collective: every rank calls it). Empty when the model's own
  // parameters are whole on every rank (stages 0-2); stage 3 gathers them from the shards.
  virtual NamedParams gathered_parameters() { return {}; }

  // The buffers holding `name`'s gradient accumulated on this rank and not yet reduced (between the
  // last backward and reduce(); mixed precision: the model-dtype part and the fp32 accumulation).
  // Adding the same tensors on other ranks into them (a tied embedding's two pipeline stages) is
  // then reduced with the rest. Stages 0 and 1 without overlap_comm; others throw.
  virtual std::vector<at::Tensor> unreduced_gradient(const std::string& name);
};

// The stage/optimizer/offload combinations ZeRO supports; a UsageError naming the key otherwise.
// make_strategy runs it; the engine's check_run_config runs it before any work (`xtrain config`).
void check_supported(const StrategyOptions& options);

// `module` may be null (named parameters only); stage 3 uses it to find its units. An empty
// options.param_group is filled from options.optimizer (optim::assign_param_groups).
std::unique_ptr<Strategy> make_strategy(NamedParams params, std::shared_ptr<torch::nn::Module> module,
                                        StrategyOptions options, std::shared_ptr<comm::Communicator> dp);

}  // namespace xtrain::zero
