#include "xtrain/engine/engine.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <cmath>
#ifdef XTRAIN_WITH_CUDA
#include <ATen/Context.h>
#endif

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/monitor/memory.h"
#include "xtrain/optim/registry.h"
#include "xtrain/parallel/data/local_sgd.h"
#include "xtrain/parallel/pipeline/pipeline_executor.h"
#include "xtrain/sched/schedule.h"
#include "xtrain/zero/grad_reduce.h"

namespace xtrain {

namespace {
zero::NamedParams named_parameters_of(const torch::nn::Module& module) {
  zero::NamedParams out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}
}  // namespace

void check_closure_optimizer(const config::Config& c) {
  const std::string& type = c.optimizer.type;
  if (!optim::find_optimizer(type).needs_closure) return;
  const std::string who = "engine: optimizer " + type + " re-evaluates the loss within its step";
  XTRAIN_USAGE_CHECK(c.zero_optimization.stage == 0, who, " and needs the whole gradient and parameters on every ",
                     "rank: zero_optimization.stage must be 0, got ", c.zero_optimization.stage);
  const int64_t gas = c.engine.gradient_accumulation_steps.value_or(1);
  XTRAIN_USAGE_CHECK(gas == 1, who, " on one batch: gradient_accumulation_steps must be 1, got ", gas,
                     " (for large-batch L-BFGS raise train_micro_batch_size_per_gpu)");
  XTRAIN_USAGE_CHECK(!c.fp16.enabled && !c.bf16.enabled && !c.amp.enabled, who, " and compares losses to ",
                     "tolerance_change in its line search; it needs fp32 (fp16 loss scaling would also skip updates ",
                     "mid-search): disable fp16, bf16 and amp");
  XTRAIN_USAGE_CHECK(c.engine.gradient_clipping == 0.0, who, " and builds curvature pairs from true gradients: ",
                     "gradient_clipping must be 0, got ", c.engine.gradient_clipping);
  XTRAIN_USAGE_CHECK(c.pipeline.stages == 1, who, ", which a pipeline schedule spreads over stages and ",
                     "micro-batches: pipeline.stages must be 1, got ", c.pipeline.stages);
  XTRAIN_USAGE_CHECK(c.tensor_parallel.size == 1, who, " and takes dot products of whole gradients: ",
                     "tensor_parallel.size must be 1, got ", c.tensor_parallel.size);
}

Engine::Engine(zero::NamedParams params, LossFn loss_fn, const config::Config& config,
               std::shared_ptr<comm::Communicator> dp)
    : config_(config), loss_fn_(std::move(loss_fn)), dp_(dp ? std::move(dp) : comm::Communicator::single()),
      scaler_(config.fp16) {
  setup(std::move(params));
}

Engine::Engine(std::shared_ptr<torch::nn::Module> module, LossFn loss_fn, const config::Config& config,
               std::shared_ptr<comm::Communicator> dp, ModelParallel mp)
    : config_(config), module_(std::move(module)), loss_fn_(std::move(loss_fn)),
      dp_(dp ? std::move(dp) : comm::Communicator::single()), mp_(std::move(mp)), scaler_(config.fp16) {
  setup(named_parameters_of(*module_));
}

Engine::~Engine() = default;

void Engine::setup(zero::NamedParams params) {
#ifdef XTRAIN_WITH_CUDA
  // tf32.enabled: TF32 tensor-core math for fp32 matmuls and convolutions (Ampere and later);
  // false keeps them in full fp32. A CPU build has no such mode (config/key_status: no effect).
  at::globalContext().setAllowTF32CuBLAS(config_.tf32.enabled);
  at::globalContext().setAllowTF32CuDNN(config_.tf32.enabled);
#endif
  policy_ = precision::make_policy(config_.fp16, config_.bf16, config_.amp, /*cuda=*/false,
                                   config_.engine.grad_accum_dtype);
  params = zero::unique_trainable(params);
  XTRAIN_USAGE_CHECK(!params.empty(), "engine: the model has no trainable parameters");
  for (const auto& [name, p] : params) {
    XTRAIN_USAGE_CHECK(at::isFloatingType(p.scalar_type()), "engine: parameter ", name, " is ", p.scalar_type(),
                       "; trainable parameters must be floating point");
  }
  XTRAIN_USAGE_CHECK(dp_->size() == config_.dp_world_size, "engine: the config was resolved for ",
                     config_.dp_world_size, " data-parallel ranks but the group has ", dp_->size());
  gas_ = *config_.engine.gradient_accumulation_steps;
  micro_batch_ = *config_.engine.train_micro_batch_size_per_gpu;
  check_closure_optimizer(config_);
  check_local_sgd(config_);
  closure_step_ = optim::find_optimizer(config_.optimizer.type).needs_closure;
  zero::StrategyOptions so;
  so.param_dtype = policy_.param_dtype;
  so.grad_accum_dtype = policy_.grad_accum_dtype;
  so.gradient_accumulation_steps = gas_;
  so.zero = config_.zero_optimization;
  so.aio = config_.aio;
  so.optimizer = config_.optimizer;
  so.prescale_gradients = config_.engine.prescale_gradients;
  so.gradient_predivide_factor = config_.engine.gradient_predivide_factor;
  so.communication_dtype = zero::communication_dtype(config_.engine.communication_data_type);
  so.allow_untested_optimizer = config_.engine.zero_allow_untested_optimizer;
  so.norm_weights = mp_.norm_weights;
  // Tied gradients are combined before the data-parallel reduction, which must not start in backward.
  if (!mp_.tied.empty()) so.zero.overlap_comm = 0;
  so.param_group = optim::assign_param_groups(params, config_.optimizer);
  group_scales_ = optim::group_hypers(config_.optimizer);  // resolved once: the step scales them by its lr
  params_ = params;
  strategy_ = zero::make_strategy(std::move(params), module_, so, gradient_group());
  if (module_ && policy_.param_dtype != at::kFloat) {  // floating buffers (BatchNorm statistics) follow
    at::NoGradGuard no_grad;
    for (auto& b : module_->named_buffers(true)) {
      if (at::isFloatingType(b.value().scalar_type())) b.value().set_data(b.value().to(policy_.param_dtype));
    }
  }
  schedule_ = sched::make_schedule(config_.scheduler, config_.optimizer.lr());
  start_local_sgd();
}

zero::NamedParams Engine::full_parameters() {
  auto out = strategy_->gathered_parameters();
  if (!out.empty()) return out;
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params_) out.emplace_back(name, p.detach().clone());
  return out;
}

at::Tensor Engine::forward(const data::Batch& batch) {
  auto timed = timer_->scope("forward");
  if (closure_step_) closure_batch_ = batch;  // the closure stage re-runs it
  precision::AutocastGuard autocast(policy_.autocast_dtype, /*cuda=*/false);
  if (policy_.mixed() && batch.input.defined() && at::isFloatingType(batch.input.scalar_type()) &&
      batch.input.scalar_type() != policy_.param_dtype) {
    data::Batch cast{batch.input.to(policy_.param_dtype), batch.target};  // fp16.auto_cast semantics
    at::Tensor loss = loss_fn_(cast);
    log_memory("after forward");
    return loss;
  }
  at::Tensor loss = loss_fn_(batch);
  log_memory("after forward");
  return loss;
}

// scale → backward: the loss is divided by the accumulation steps and multiplied by the loss scale.
void Engine::backward(const at::Tensor& loss) {
  auto timed = timer_->scope("backward");
  TORCH_CHECK(loss.numel() == 1, "engine: backward expects a scalar loss, got shape ", loss.sizes());
  loss_sum_ += loss.detach().item<double>();
  ++loss_count_;
  const bool boundary = is_gradient_accumulation_boundary();
  strategy_->before_backward(boundary);
  const double factor = scaler_.scale() / static_cast<double>(gas_);
  if (factor != 1.0) {
    (loss.to(at::kFloat) * factor).backward();
  } else {
    loss.backward();
  }
  strategy_->after_backward(boundary);
  log_memory("after backward");
}

bool Engine::is_gradient_accumulation_boundary() const { return (micro_steps_ + 1) % gas_ == 0; }

bool Engine::step() {
  const bool boundary = is_gradient_accumulation_boundary();
  ++micro_steps_;
  global_samples_ += micro_batch_ * config_.dp_world_size;
  if (!boundary) return false;
  optimizer_step();
  if (local_sgd_) {
    auto timed = timer_->scope("communication");
    local_sgd_->after_step();
  }
  log_memory("after optimizer step");
  return true;
}

// The fixed sequence of an optimizer step; the strategy supplies reduce, step and gather.
void Engine::optimizer_step() {
  auto timed = timer_->scope("optimizer");  // the reduce inside is timed as "communication"
  last_ = StepStats{};
  last_.step = ++global_steps_;
  last_.loss = mean_over_ranks(loss_count_ ? loss_sum_ / static_cast<double>(loss_count_) : 0.0);
  last_.loss_scale = scaler_.scale();
  loss_sum_ = 0.0;
  loss_count_ = 0;
  // reduce: gradients averaged over data-parallel ranks (what overlap did not already finish).
  {
    auto comm_timed = timer_->scope("communication");
    sum_tied_gradients();
    strategy_->reduce();
  }
  // unscale/check: the norm of the scaled gradients; inf/NaN anywhere makes it non-finite.
  const double scaled_norm = std::sqrt(model_parallel_sum(strategy_->grad_norm_squared()));
  const bool overflow = policy_.loss_scaling && !std::isfinite(scaled_norm);
  last_.grad_norm = scaled_norm / scaler_.scale();
  const auto verdict = scaler_.update(overflow);
  if (!verdict.message.empty()) scaler_messages_.push_back(c10::str("step ", last_.step, ": ", verdict.message));
  const int64_t k = applied_steps_ + 1;
  last_.lr = lr_for_step(k);
  if (verdict.skipped) {  // no parameter, optimizer-state or scheduler change
    last_.skipped = true;
    ++skipped_steps_;
    strategy_->zero_grads();
    return;
  }
  // clip → step → gather: one fused pass unscales and clips (grad_scale), updates the fp32 master
  // and writes the model's parameters; partitioned strategies then gather them.
  zero::StepHyper h;
  h.groups = optim::at_lr(group_scales_, last_.lr);
  h.grad_scale = combined_grad_scale(scaled_norm);
  std::tie(h.beta1_override, h.beta2_override) = schedule_->betas_after(k - 1);
  if (closure_step_) {
    h.closure = [this] { return reevaluate_loss(); };
    h.loss = last_.loss;
  }
  strategy_->step(h);
  ++applied_steps_;
  // schedule: the adaptive schedule watches the loss.
  schedule_->observe(applied_steps_, last_.loss);
  strategy_->zero_grads();
}

double Engine::reevaluate_loss() {
  at::AutoGradMode grad_on(true);
  strategy_->zero_grads();
  strategy_->before_backward(/*boundary=*/true);
  const at::Tensor loss = loss_fn_(closure_batch_);
  TORCH_CHECK(loss.numel() == 1, "engine: the loss must be a scalar, got shape ", loss.sizes());
  loss.backward();
  strategy_->after_backward(/*boundary=*/true);
  strategy_->reduce();
  return mean_over_ranks(loss.detach().item<double>());
}

// DeepSpeed's combined divisor (§a.4): C = S · max(1, (N/S + 1e-6) / clip); gradients × 1/C.
// Without clipping this is 1/S; in fp32 (S = 1) it is torch's clip_grad_norm_ coefficient.
double Engine::combined_grad_scale(double scaled_norm) const {
  const double s = scaler_.scale();
  const double max_norm = config_.engine.gradient_clipping;
  double c = s;
  if (max_norm > 0.0) c = s * std::max(1.0, (scaled_norm / s + 1e-6) / max_norm);
  return 1.0 / c;
}

// A tied parameter's gradient is the sum of its uses on every rank that holds it (reductions are
// linear, so summing before the data-parallel mean equals summing after).
void Engine::sum_tied_gradients() {
  if (mp_.tied.empty() || !mp_.tied_group || !mp_.tied_group->distributed()) return;
  at::NoGradGuard no_grad;
  for (const auto& name : mp_.tied) {
    for (auto& part : strategy_->unreduced_gradient(name)) mp_.tied_group->all_reduce(part, comm::ReduceOp::kSum);
  }
}

// Over the model-parallel group: every part of the replica contributes to the norm (and an overflow
// on one rank skips the step on all).
double Engine::model_parallel_sum(double value) const { return mp_.group ? comm::all_reduce_sum(*mp_.group, value) : value; }

// The logged loss is the mean over data-parallel ranks (one scalar all-reduce per step).
double Engine::mean_over_ranks(double value) const { return comm::all_reduce_sum(*dp_, value) / dp_->size(); }

double Engine::lr_for_step(int64_t k) const { return lr_override_ >= 0 ? lr_override_ : schedule_->lr_after(k - 1); }

double Engine::current_lr() const { return lr_for_step(applied_steps_ + 1); }

std::vector<sched::Decision> Engine::take_schedule_decisions() { return schedule_->take_decisions(); }

std::vector<std::string> Engine::take_scaler_messages() {
  std::vector<std::string> out;
  out.swap(scaler_messages_);
  return out;
}

void Engine::train(bool on) {
  if (module_) module_->train(on);
}

void Engine::log_memory(const char* stage) {
  if (!config_.engine.memory_breakdown || dp_->rank() != 0 || (mp_.group && mp_.group->rank() != 0)) return;
  log::info(monitor::memory_breakdown_line(stage, memory_bytes()));
}

std::map<std::string, int64_t> Engine::memory_bytes() {
  const auto r = strategy_->memory();
  std::map<std::string, int64_t> m = {{"params", r.param_bytes}, {"grads", r.grad_bytes}, {"optimizer", r.optimizer_bytes}};
  if (r.master_bytes) m["master"] = r.master_bytes;
  if (r.disk_bytes) m["nvme"] = r.disk_bytes;
  return m;
}

}  // namespace xtrain
