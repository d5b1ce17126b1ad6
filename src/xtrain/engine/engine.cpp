#include "xtrain/engine/engine.h"

#include <ATen/Functions.h>
#include <torch/nn/module.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/optim/optimizer.h"
#include "xtrain/sched/schedule.h"

namespace xtrain {

namespace {
zero::NamedParams named_parameters_of(const torch::nn::Module& module) {
  zero::NamedParams out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

bool is_low_precision(c10::ScalarType t) { return t == at::kBFloat16 || t == at::kHalf; }
}  // namespace

Engine::Engine(zero::NamedParams params, LossFn loss_fn, const config::Config& config)
    : config_(config), loss_fn_(std::move(loss_fn)), scaler_(config.fp16) {
  setup(std::move(params));
}

Engine::Engine(std::shared_ptr<torch::nn::Module> module, LossFn loss_fn, const config::Config& config)
    : config_(config), module_(std::move(module)), loss_fn_(std::move(loss_fn)), scaler_(config.fp16) {
  setup(named_parameters_of(*module_));
}

Engine::~Engine() = default;

void Engine::setup(zero::NamedParams params) {
  policy_ = precision::make_policy(config_.fp16, config_.bf16, config_.amp, /*cuda=*/false,
                                   config_.engine.grad_accum_dtype);
  params_ = zero::unique_trainable(params);
  XTRAIN_USAGE_CHECK(!params_.empty(), "engine: the model has no trainable parameters");
  for (const auto& [name, p] : params_) {
    XTRAIN_USAGE_CHECK(at::isFloatingType(p.scalar_type()), "engine: parameter ", name, " is ", p.scalar_type(),
                       "; trainable parameters must be floating point");
  }
  gas_ = *config_.engine.gradient_accumulation_steps;
  micro_batch_ = *config_.engine.train_micro_batch_size_per_gpu;
  std::vector<bool> no_decay;
  for (const auto& [name, p] : params_) no_decay.push_back(config_.optimizer.no_decay_for_bias_and_norm && p.dim() < 2);
  layout_ = zero::make_layout(params_, no_decay, /*world_size=*/1, /*alignment=*/16);
  allocate_buffers();
  segments_ = layout_.segments(0, layout_.numel);
  optimizer_ = optim::make_optimizer(config_.optimizer);
  optimizer_->init_state(layout_.numel);
  schedule_ = sched::make_schedule(config_.scheduler, config_.optimizer.lr());
}

// The fp32 master copy comes from the parameters' values as given (a model that already holds
// bf16/fp16 parameters gets an fp32 master rounded from them); the model's parameters are then
// views of a buffer of the policy's dtype.
void Engine::allocate_buffers() {
  at::NoGradGuard no_grad;
  const auto dtype = policy_.param_dtype;
  flat_master_ = at::zeros({layout_.numel}, at::kFloat);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& slot = layout_.slots[i];
    flat_master_.narrow(0, slot.offset, slot.numel).copy_(params_[i].second.reshape({-1}));
  }
  flat_params_ = dtype == at::kFloat ? flat_master_ : at::zeros({layout_.numel}, dtype);
  zero::bind_params(params_, layout_, flat_params_);  // copies (rounds) the values, then views
  flat_grads_ = at::zeros({layout_.numel}, dtype);
  zero::bind_grads(params_, layout_, flat_grads_);
  if (policy_.mixed() && gas_ > 1 && policy_.grad_accum_dtype == at::kFloat) {
    flat_grad_acc_ = at::zeros({layout_.numel}, at::kFloat);
  }
  if (module_ && dtype != at::kFloat) {  // floating buffers (BatchNorm statistics) follow the parameters
    for (auto& b : module_->named_buffers(true)) {
      if (at::isFloatingType(b.value().scalar_type())) b.value().set_data(b.value().to(dtype));
    }
  }
}

at::Tensor Engine::forward(const data::Batch& batch) {
  precision::AutocastGuard autocast(policy_.autocast_dtype, /*cuda=*/false);
  if (policy_.mixed() && batch.input.defined() && at::isFloatingType(batch.input.scalar_type()) &&
      batch.input.scalar_type() != policy_.param_dtype) {
    data::Batch cast{batch.input.to(policy_.param_dtype), batch.target};  // fp16.auto_cast semantics
    return loss_fn_(cast);
  }
  return loss_fn_(batch);
}

void Engine::backward(const at::Tensor& loss) {
  TORCH_CHECK(loss.numel() == 1, "engine: backward expects a scalar loss, got shape ", loss.sizes());
  loss_sum_ += loss.detach().item<double>();
  ++loss_count_;
  const double factor = scaler_.scale() / static_cast<double>(gas_);
  if (factor != 1.0) {
    (loss.to(at::kFloat) * factor).backward();
  } else {
    loss.backward();
  }
  if (flat_grad_acc_.defined()) accumulate_micro_batch_grads();
}

// Mixed precision with accumulation: each micro-batch's low-precision gradients are added into the
// fp32 accumulator and cleared, so accumulation error does not grow with the number of micro-batches.
void Engine::accumulate_micro_batch_grads() {
  at::NoGradGuard no_grad;
  flat_grad_acc_.add_(flat_grads_);
  flat_grads_.zero_();
}

bool Engine::is_gradient_accumulation_boundary() const { return (micro_steps_ + 1) % gas_ == 0; }

bool Engine::step() {
  const bool boundary = is_gradient_accumulation_boundary();
  ++micro_steps_;
  global_samples_ += micro_batch_ * config_.dp_world_size;
  if (!boundary) return false;
  optimizer_step();
  return true;
}

// The fixed sequence of an optimizer step. Each line is one stage; later features (data-parallel
// reduction, ZeRO partitioning) supply their own object for a stage.
void Engine::optimizer_step() {
  last_ = StepStats{};
  last_.step = ++global_steps_;
  last_.loss = loss_count_ ? loss_sum_ / static_cast<double>(loss_count_) : 0.0;
  last_.loss_scale = scaler_.scale();
  loss_sum_ = 0.0;
  loss_count_ = 0;
  // reduce: single process, nothing to do.
  // unscale/check: the norm of the scaled gradients; inf/NaN anywhere makes it non-finite.
  const double scaled_norm = global_grad_norm();
  const bool overflow = policy_.loss_scaling && !std::isfinite(scaled_norm);
  last_.grad_norm = scaled_norm / scaler_.scale();
  const auto verdict = scaler_.update(overflow);
  if (!verdict.message.empty()) scaler_messages_.push_back(c10::str("step ", last_.step, ": ", verdict.message));
  const int64_t k = applied_steps_ + 1;
  last_.lr = lr_for_step(k);
  if (verdict.skipped) {  // no parameter, optimizer-state or scheduler change
    last_.skipped = true;
    ++skipped_steps_;
    zero_grads();
    return;
  }
  // clip → step → gather: one fused pass unscales and clips the gradients (grad_scale), updates the
  // fp32 master and writes the low-precision parameters.
  optim::StepInputs in;
  in.params = flat_master_;
  in.grads = reduced_grads();
  in.grad_scale = combined_grad_scale(scaled_norm);
  if (policy_.mixed()) in.params_lowp = flat_params_;
  in.segments = &segments_;
  in.groups = {{last_.lr, config_.optimizer.weight_decay()}, {last_.lr, 0.0}};
  const auto [beta1, beta2] = schedule_->betas_after(k - 1);
  in.beta1_override = beta1;
  in.beta2_override = beta2;
  {
    at::NoGradGuard no_grad;
    optimizer_->step(in);
  }
  ++applied_steps_;
  // schedule: the adaptive schedule watches the loss.
  schedule_->observe(applied_steps_, last_.loss);
  zero_grads();
}

const at::Tensor& Engine::reduced_grads() const { return flat_grad_acc_.defined() ? flat_grad_acc_ : flat_grads_; }

double Engine::global_grad_norm() const {
  const auto& g = reduced_grads();
  return (g.scalar_type() == at::kFloat ? g.norm() : g.to(at::kFloat).norm()).item<double>();
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

void Engine::zero_grads() {
  flat_grads_.zero_();
  if (flat_grad_acc_.defined()) flat_grad_acc_.zero_();
}

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

}  // namespace xtrain
