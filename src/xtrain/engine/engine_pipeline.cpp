// Engine under pipeline parallelism: a step's micro-batches run through this stage's schedule
// (PipelineExecutor); the strategy sees each micro-batch's backward as it does without a pipeline,
// and the optimizer step is the same fixed sequence (optimizer_step), with the tied embedding's
// gradients summed across the first and last stage before the data-parallel reduction.
#include <ATen/Functions.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/engine/engine.h"
#include "xtrain/parallel/pipeline/pipeline_executor.h"
#include "xtrain/parallel/pipeline/schedule.h"

namespace xtrain {

void Engine::set_pipeline(PipelineStage stage) {
  XTRAIN_USAGE_CHECK(config_.zero_optimization.stage <= 1, "config: pipeline.stages > 1 works with ZeRO stage 0 or 1 ",
                     "(the data-parallel dimension; as DeepSpeed's pipeline engine), got zero_optimization.stage ",
                     config_.zero_optimization.stage);
  check_closure_optimizer(config_);  // an optimizer that re-runs the loss cannot run a pipeline
  XTRAIN_USAGE_CHECK(stage.forward && stage.group, "engine: set_pipeline needs the stage's forward and its group");
  parallel::pipeline::schedule_kind_from_name(stage.schedule);  // validates
  stage_ = std::move(stage);
  // The last stage's loss carries the loss scale; the executor divides it by the micro-batch count.
  auto loss = [this](const at::Tensor& output, const at::Tensor& target) {
    const at::Tensor l = stage_.loss(output, target);
    return scaler_.scale() != 1.0 ? l.to(at::kFloat) * scaler_.scale() : l;
  };
  pipeline_ = std::make_unique<parallel::pipeline::PipelineExecutor>(stage_.forward, stage_.group, loss);
  parallel::pipeline::BackwardHooks hooks;
  hooks.before_backward = [this](int, bool last) { strategy_->before_backward(last); };
  hooks.after_backward = [this](int, bool last) { strategy_->after_backward(last); };
  pipeline_->set_backward_hooks(std::move(hooks));
}

void Engine::pipeline_step(const std::vector<data::Batch>& micro_batches) {
  TORCH_CHECK(pipeline_, "engine: pipeline_step before set_pipeline");
  XTRAIN_USAGE_CHECK(static_cast<int64_t>(micro_batches.size()) == gas_, "engine: a pipeline step takes ", gas_,
                     " micro-batches (gradient_accumulation_steps), got ", micro_batches.size());
  std::vector<at::Tensor> inputs, targets;
  for (const auto& b : micro_batches) {
    inputs.push_back(b.input);
    targets.push_back(b.target);
  }
  const auto schedule = parallel::pipeline::make_schedule(parallel::pipeline::schedule_kind_from_name(stage_.schedule),
                                                          pipeline_->stages(), static_cast<int>(gas_), pipeline_->stage());
  at::Tensor loss;
  {
    auto timed = timer_->scope("forward");  // forward and backward interleave: one scope for both
    precision::AutocastGuard autocast(policy_.autocast_dtype, /*cuda=*/false);
    loss = pipeline_->run(schedule, inputs, targets);
  }
  log_memory("after forward and backward (pipeline)");
  // The mean micro-batch loss, known on the last stage: summed over the pipeline group (the other
  // stages add zero) so every stage logs it.
  const double mean_loss =
      comm::all_reduce_sum(*stage_.group, loss.defined() ? loss.detach().item<double>() / scaler_.scale() : 0.0);
  loss_sum_ += mean_loss * static_cast<double>(gas_);
  loss_count_ += gas_;
  micro_steps_ += gas_;
  global_samples_ += micro_batch_ * config_.dp_world_size * gas_;
  optimizer_step();
  log_memory("after optimizer step");
}

std::pair<double, double> Engine::pipeline_busy_total() const {
  if (!pipeline_) return {0.0, 0.0};
  return {pipeline_->stats().busy_s, pipeline_->stats().total_s};
}

}  // namespace xtrain
