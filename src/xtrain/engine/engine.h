// Engine: wires the features for one rank. The core works on named parameters and a
// loss-producing callable (a torch::nn::Module is one way to supply them). Call forward/backward/
// step for every micro-batch; the optimizer steps at the accumulation boundary, in a fixed
// sequence of named stages (Engine::optimizer_step in engine.cpp): reduce → unscale/check → clip →
// step → gather → schedule. DeepSpeed's engine semantics (reference/deepspeed.md §a.1, §c.1).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/config/config.h"
#include "xtrain/data/batch.h"
#include "xtrain/monitor/stage_timer.h"
#include "xtrain/precision/loss_scaler.h"
#include "xtrain/precision/policy.h"
#include "xtrain/zero/flat_layout.h"
#include "xtrain/zero/strategy.h"

namespace torch::nn {
class Module;
}
namespace xtrain::comm {
class Communicator;
}
namespace xtrain::sched {
class Schedule;
struct Decision;
}
namespace xtrain::parallel::pipeline {
class PipelineExecutor;
}
namespace xtrain::parallel {
class LocalSgd;
}
namespace xtrain::checkpoint {
class CheckpointWriter;
class CheckpointReader;
}

namespace xtrain {

struct StepStats {
  int64_t step = 0;        // global step this was (1-based)
  double loss = 0.0;       // mean training loss over the step's micro-batches
  double grad_norm = 0.0;  // global L2 norm before clipping
  double lr = 0.0;         // lr used by this step
  bool skipped = false;    // overflow: no update
  double loss_scale = 1.0; // fp16: the scale this step's gradients carried
};

// Tensor and pipeline parallelism as the engine sees them: the ranks that together hold one replica
// of the model, and which of their parameters are copies.
struct ModelParallel {
  // This replica's model-parallel ranks (tensor × pipeline); the squared gradient norm is summed over
  // them. nullptr: no model parallelism.
  std::shared_ptr<comm::Communicator> group;
  // A parameter held identically by k ranks of `group` weighs 1/k in the norm (zero::StrategyOptions).
  std::map<std::string, double> norm_weights;
  // Parameters this rank shares with others (the tied embedding on the first and last pipeline
  // stage): their gradients are summed over `tied_group` before the data-parallel reduction.
  std::vector<std::string> tied;
  std::shared_ptr<comm::Communicator> tied_group;
};

// Pipeline parallelism (parallel/pipeline/): this rank's stage. The engine runs a step's micro-batches
// through the schedule with a PipelineExecutor.
struct PipelineStage {
  std::function<at::Tensor(const at::Tensor&)> forward;                       // this stage's layers
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> loss;  // last stage: (output, target)
  std::shared_ptr<comm::Communicator> group;                               // the pipeline group: rank = stage
  std::string schedule = "1f1b";                                           // pipeline.schedule
};

// An optimizer that re-runs the loss within its step (optim::OptimizerEntry::needs_closure: LBFGS)
// needs whole fp32 gradients of one batch on every rank; what it cannot run with is a UsageError
// naming the key and why. The Engine and the run's config checks (`xtrain config`) call it.
void check_closure_optimizer(const config::Config& config);
// xtrain.local_sgd replaces the per-step gradient all-reduce; what it cannot run with (ZeRO stage >= 1,
// tensor or pipeline parallelism, fp16/bf16, closure optimizers) is a UsageError naming the key
// (engine_local_sgd.cpp).
void check_local_sgd(const config::Config& config);

class Engine {
 public:
  using LossFn = std::function<at::Tensor(const data::Batch&)>;

  // `dp`: the data-parallel group (nullptr: a single process). Rank 0's initial parameters are
  // broadcast to every rank.
  Engine(zero::NamedParams params, LossFn loss_fn, const config::Config& config,
         std::shared_ptr<comm::Communicator> dp = nullptr);
  // A Module's parameters (and, in mixed precision, its floating buffers) are cast to the policy's
  // parameter dtype.
  Engine(std::shared_ptr<torch::nn::Module> module, LossFn loss_fn, const config::Config& config,
         std::shared_ptr<comm::Communicator> dp = nullptr, ModelParallel mp = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The loss of one micro-batch (not yet divided by the accumulation steps).
  at::Tensor forward(const data::Batch& batch);
  // Divides by gradient_accumulation_steps (when > 1) and runs autograd into the flat gradients.
  void backward(const at::Tensor& loss);
  // Call after every micro-batch. Returns true when this call was an accumulation boundary and
  // an optimizer step was attempted (see last_step()).
  bool step();

  // Pipeline parallelism: set_pipeline once, then one call per optimizer step with its
  // gradient_accumulation_steps micro-batches (every stage passes the same batches: the first
  // stage reads the inputs, the last the targets). The loss (last stage's, shared over the
  // pipeline group) and the step are in last_step().
  void set_pipeline(PipelineStage stage);
  void pipeline_step(const std::vector<data::Batch>& micro_batches);
  bool pipelined() const { return pipeline_ != nullptr; }
  // The last run's busy and total time on this stage (parallel::pipeline::PipelineStats).
  std::pair<double, double> pipeline_busy_total() const;

  bool is_gradient_accumulation_boundary() const;
  int64_t global_steps() const { return global_steps_; }
  int64_t global_samples() const { return global_samples_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t micro_steps() const { return micro_steps_; }
  const StepStats& last_step() const { return last_; }
  double current_lr() const;  // the lr the next optimizer step will use
  // Replaces the schedule's lr (lr range tests); a negative value restores the schedule.
  void set_lr_override(double lr) { lr_override_ = lr; }
  std::vector<sched::Decision> take_schedule_decisions();
  const config::Config& config() const { return config_; }
  const zero::FlatLayout& layout() const { return strategy_->layout(); }
  int64_t num_parameters() const { return strategy_->layout().used; }
  zero::MemoryReport memory() const { return strategy_->memory(); }
  // Every trainable parameter whole, by name, in the model's dtype (copies). Collective: every
  // data-parallel rank calls it (ZeRO stage 3 gathers the shards).
  zero::NamedParams full_parameters();
  const zero::Strategy& strategy() const { return *strategy_; }
  comm::Communicator& dp() const { return *dp_; }
  // Bytes this rank has sent over the data-parallel group so far (comm::CommStats::sent_bytes):
  // gradient all-reduces, or local SGD's parameter synchronisations, and the scalar loss means.
  int64_t comm_bytes() const;
  // xtrain.local_sgd's state; nullptr when it is off.
  const parallel::LocalSgd* local_sgd() const { return local_sgd_.get(); }
  int64_t gradient_accumulation_steps() const { return gas_; }
  const precision::PrecisionPolicy& precision() const { return policy_; }
  const precision::LossScaler& loss_scaler() const { return scaler_; }
  // Messages from the loss scaler since the last call (overflows, scale changes), for the log.
  std::vector<std::string> take_scaler_messages();
  std::shared_ptr<torch::nn::Module> module() const { return module_; }
  void train(bool on = true);
  // wall_clock_breakdown: forward, backward and optimizer run inside scopes of this timer (the
  // trainer's; it opens "data" and begins/ends steps). nullptr: no timing.
  void set_stage_timer(monitor::StageTimer* timer) { timer_ = timer ? timer : &no_timer_; }
  // Bytes held per area, for the memory metrics: "params", "master", "grads", "optimizer".
  std::map<std::string, int64_t> memory_bytes();

  // Writes model.pt (parameters by name), optimizer.pt (state by "<state>/<param name>") and
  // engine.json (counters, scheduler and optimizer scalars) into the writer.
  void save_checkpoint(checkpoint::CheckpointWriter& writer) const;
  // Restores everything save_checkpoint wrote. `load_optimizer=false` loads weights only.
  void load_checkpoint(const checkpoint::CheckpointReader& reader, bool load_optimizer = true);

 private:
  void setup(zero::NamedParams params);
  void optimizer_step();
  // The closure stage (torch's step(closure)): forward and backward of this step's batch at the
  // current parameters, reduced over data-parallel ranks; returns the mean loss over ranks.
  double reevaluate_loss();
  // memory_breakdown: one line of process and per-area memory after a stage of the step, on the
  // first rank of the grid (DeepSpeed's see_memory_usage(..., force=memory_breakdown)).
  void log_memory(const char* stage);
  // checkpoint.tag_validation (engine_checkpoint.cpp); collective unless the mode is Ignore.
  void validate_checkpoint_tag(const std::string& tag) const;
  double combined_grad_scale(double scaled_norm) const;
  double mean_over_ranks(double value) const;
  double model_parallel_sum(double value) const;
  void sum_tied_gradients();
  double lr_for_step(int64_t k) const;  // the lr of successful step k (1-based)
  // xtrain.local_sgd (engine_local_sgd.cpp): the group the strategy reduces over (one rank when on),
  // the synchroniser, and its part of a checkpoint (each rank's own parameters and optimizer state).
  std::shared_ptr<comm::Communicator> gradient_group() const;
  void start_local_sgd();
  void save_local_sgd(checkpoint::CheckpointWriter& writer) const;
  void load_local_sgd(const checkpoint::CheckpointReader& reader, bool load_optimizer);

  config::Config config_;
  std::shared_ptr<torch::nn::Module> module_;
  LossFn loss_fn_;
  bool closure_step_ = false;  // the optimizer re-runs the loss within its step
  data::Batch closure_batch_;  // this step's batch, for the closure stage
  std::shared_ptr<comm::Communicator> dp_;
  ModelParallel mp_;
  PipelineStage stage_;
  std::unique_ptr<parallel::pipeline::PipelineExecutor> pipeline_;
  precision::PrecisionPolicy policy_;
  precision::LossScaler scaler_;
  std::vector<std::string> scaler_messages_;
  zero::NamedParams params_;                   // the trainable parameters, as given
  std::unique_ptr<zero::Strategy> strategy_;  // parameters, gradients, optimizer state, reduction
  std::unique_ptr<sched::Schedule> schedule_;
  std::unique_ptr<parallel::LocalSgd> local_sgd_;
  std::vector<optim::GroupHyper> group_scales_;  // each parameter group's lr_scale and weight decay
  int64_t gas_ = 1;
  int64_t micro_batch_ = 1;
  int64_t micro_steps_ = 0;     // micro-batches seen
  int64_t global_steps_ = 0;    // optimizer steps attempted (DeepSpeed counts skipped ones too)
  int64_t applied_steps_ = 0;   // successful steps: the scheduler's position
  int64_t skipped_steps_ = 0;
  int64_t global_samples_ = 0;
  double lr_override_ = -1.0;
  double loss_sum_ = 0.0;       // over the current accumulation window
  int64_t loss_count_ = 0;
  StepStats last_;
  monitor::StageTimer no_timer_{false};
  monitor::StageTimer* timer_ = &no_timer_;
};

}  // namespace xtrain
