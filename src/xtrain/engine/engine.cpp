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
}  // namespace

Engine::Engine(zero::NamedParams params, LossFn loss_fn, const config::Config& config)
    : config_(config), loss_fn_(std::move(loss_fn)) {
  setup(std::move(params));
}

Engine::Engine(std::shared_ptr<torch::nn::Module> module, LossFn loss_fn, const config::Config& config)
    : config_(config), module_(std::move(module)), loss_fn_(std::move(loss_fn)) {
  setup(named_parameters_of(*module_));
}

Engine::~Engine() = default;

void Engine::setup(zero::NamedParams params) {
  params_ = zero::unique_trainable(params);
  XTRAIN_USAGE_CHECK(!params_.empty(), "engine: the model has no trainable parameters");
  for (const auto& [name, p] : params_) {
    XTRAIN_USAGE_CHECK(p.scalar_type() == at::kFloat, "engine: parameter ", name, " is ", p.scalar_type(),
                       "; models must be built in float32 (use bf16.enabled for low precision)");
  }
  gas_ = *config_.engine.gradient_accumulation_steps;
  micro_batch_ = *config_.engine.train_micro_batch_size_per_gpu;
  std::vector<bool> no_decay;
  for (const auto& [name, p] : params_) no_decay.push_back(config_.optimizer.no_decay_for_bias_and_norm && p.dim() < 2);
  layout_ = zero::make_layout(params_, no_decay, /*world_size=*/1, /*alignment=*/16);
  flat_params_ = at::zeros({layout_.numel}, at::kFloat);
  flat_grads_ = at::zeros({layout_.numel}, at::kFloat);
  zero::bind_params(params_, layout_, flat_params_);
  zero::bind_grads(params_, layout_, flat_grads_);
  segments_ = layout_.segments(0, layout_.numel);
  optimizer_ = optim::make_optimizer(config_.optimizer);
  optimizer_->init_state(layout_.numel);
  schedule_ = sched::make_schedule(config_.scheduler, config_.optimizer.lr());
}

at::Tensor Engine::forward(const data::Batch& batch) { return loss_fn_(batch); }

void Engine::backward(const at::Tensor& loss) {
  TORCH_CHECK(loss.numel() == 1, "engine: backward expects a scalar loss, got shape ", loss.sizes());
  loss_sum_ += loss.detach().item<double>();
  ++loss_count_;
  if (gas_ > 1) {
    (loss / static_cast<double>(gas_)).backward();
  } else {
    loss.backward();
  }
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

// The fixed sequence of an optimizer step. Each line is one stage; later features (loss
// scaling, data-parallel reduction, ZeRO gather) supply their own object for a stage.
void Engine::optimizer_step() {
  last_ = StepStats{};
  last_.step = ++global_steps_;
  last_.loss = loss_count_ ? loss_sum_ / static_cast<double>(loss_count_) : 0.0;
  loss_sum_ = 0.0;
  loss_count_ = 0;
  // reduce: single process, nothing to do.
  // unscale/check: fp32 has no loss scale.
  last_.grad_norm = global_grad_norm();
  // clip → step: one fused pass multiplies the gradients by the clip coefficient.
  const int64_t k = applied_steps_ + 1;
  last_.lr = lr_for_step(k);
  optim::StepInputs in;
  in.params = flat_params_;
  in.grads = flat_grads_;
  in.grad_scale = clip_coefficient(last_.grad_norm);
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
  // gather: parameters are views of the master buffer in fp32; nothing to copy.
  // schedule: the adaptive schedule watches the loss.
  schedule_->observe(applied_steps_, last_.loss);
  flat_grads_.zero_();
}

double Engine::global_grad_norm() const { return flat_grads_.norm().item<double>(); }

double Engine::clip_coefficient(double norm) const {
  const double max_norm = config_.engine.gradient_clipping;
  if (max_norm <= 0.0) return 1.0;
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is < 1.
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? coef : 1.0;
}

double Engine::lr_for_step(int64_t k) const { return lr_override_ >= 0 ? lr_override_ : schedule_->lr_after(k - 1); }

double Engine::current_lr() const { return lr_for_step(applied_steps_ + 1); }

std::vector<sched::Decision> Engine::take_schedule_decisions() { return schedule_->take_decisions(); }

void Engine::train(bool on) {
  if (module_) module_->train(on);
}

}  // namespace xtrain
