// CheckpointFunction: forward runs fn with grad off (the autograd Function machinery does that) and
// saves x; backward restores the forward's RNG/autocast state, reruns fn with grad on over a
// detached x, differentiates it with torch::autograd::grad and hands the gradients of x and of the
// parameters back to the outer graph. The function, the states and the parameter handles travel
// in one capsule in ctx->saved_data (an IValue cannot hold a std::function otherwise).
#include "xtrain/nn/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>

#include "xtrain/base/error.h"

namespace xtrain::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor generator_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The global state a recomputation must share with the forward: the CPU generator (dropout on CPU),
// the device generator for a CUDA input, and the autocast switches and dtypes.
struct RunState {
  at::Tensor cpu_rng;
  at::Tensor device_rng;
  c10::Device device{c10::kCPU};
  bool autocast_gpu = false, autocast_cpu = false;
  at::ScalarType autocast_gpu_dtype = at::kHalf, autocast_cpu_dtype = at::kBFloat16;

  static RunState capture(const c10::Device& device) {
    RunState s;
    s.cpu_rng = generator_state(at::detail::getDefaultCPUGenerator());
    s.device = device;
    if (device.is_cuda()) s.device_rng = generator_state(at::globalContext().defaultGenerator(device));
    s.autocast_gpu = at::autocast::is_enabled();
    s.autocast_cpu = at::autocast::is_cpu_enabled();
    s.autocast_gpu_dtype = at::autocast::get_autocast_gpu_dtype();
    s.autocast_cpu_dtype = at::autocast::get_autocast_cpu_dtype();
    return s;
  }
  void apply() const {
    set_generator_state(at::detail::getDefaultCPUGenerator(), cpu_rng);
    if (device_rng.defined()) set_generator_state(at::globalContext().defaultGenerator(device), device_rng);
    at::autocast::set_enabled(autocast_gpu);
    at::autocast::set_cpu_enabled(autocast_cpu);
    at::autocast::set_autocast_gpu_dtype(autocast_gpu_dtype);
    at::autocast::set_autocast_cpu_dtype(autocast_cpu_dtype);
  }
};

// Enters `state` for the recomputation and puts the backward pass's state back however it ends
// (PyTorch's fork_rng). With autocast on it also nests like an autocast region, so the weight casts
// cached during the recomputation are dropped at its end: left in the cache they would be served,
// stale, to the next forward after the optimizer step (the cache is keyed by the weight's address).
class RecomputeScope {
 public:
  explicit RecomputeScope(const RunState& state)
      : saved_(RunState::capture(state.device)), autocast_(state.autocast_gpu || state.autocast_cpu) {
    state.apply();
    if (autocast_) at::autocast::increment_nesting();
  }
  ~RecomputeScope() {
    if (autocast_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    saved_.apply();
  }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  RunState saved_;
  bool autocast_;
};

struct Capsule : torch::CustomClassHolder {
  CheckpointFn fn;
  std::vector<at::Tensor> params;
  RunState state;
  bool input_requires_grad = false;
  std::shared_ptr<const ActivationPartitioner> partitioner;
  std::vector<int64_t> input_sizes;
};

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  // params are inputs only so autograd routes their gradients; fn reads them itself.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params, CheckpointFn* fn,
                            const CheckpointOptions* options) {
    auto capsule = c10::make_intrusive<Capsule>();
    capsule->state = RunState::capture(x.device());
    capsule->params = params.vec();
    capsule->input_requires_grad = x.requires_grad();
    capsule->partitioner = options->partitioner;
    capsule->input_sizes = x.sizes().vec();
    // Saved through save_for_backward so an in-place change of x before backward is an error
    // (a kept partition is a copy: then that check is lost).
    at::Tensor kept = options->partitioner ? options->partitioner->keep(x.detach()) : x;
    ctx->save_for_backward({options->cpu_checkpointing && !kept.is_cpu() ? kept.to(at::kCPU) : kept});
    at::Tensor y = (*fn)(x);
    capsule->fn = std::move(*fn);
    ctx->saved_data["capsule"] = c10::IValue::make_capsule(std::move(capsule));
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto holder = ctx->saved_data["capsule"].toCapsule();
    auto* capsule = static_cast<Capsule*>(holder.get());
    at::Tensor saved = ctx->get_saved_variables()[0].to(capsule->state.device);
    if (capsule->partitioner) saved = capsule->partitioner->restore(saved, capsule->input_sizes);
    at::Tensor x = saved.detach().requires_grad_(capsule->input_requires_grad);
    at::Tensor y;
    {
      RecomputeScope scope(capsule->state);
      at::AutoGradMode grad_on(true);
      y = capsule->fn(x);
    }
    // Differentiate with respect to what needs a gradient; the rest gets an undefined one.
    // One gradient per forward argument: x, each parameter, then fn and options.
    variable_list out(1 + capsule->params.size() + 2);
    std::vector<at::Tensor> wrt;
    std::vector<size_t> slot;  // where each of wrt's gradients goes in `out`
    if (x.requires_grad()) {
      wrt.push_back(x);
      slot.push_back(0);
    }
    for (size_t i = 0; i < capsule->params.size(); ++i) {
      if (!capsule->params[i].requires_grad()) continue;
      wrt.push_back(capsule->params[i]);
      slot.push_back(1 + i);
    }
    if (wrt.empty() || !y.requires_grad() || !grads[0].defined()) return out;
    const auto g = torch::autograd::grad({y}, wrt, {grads[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                         /*allow_unused=*/true);
    for (size_t i = 0; i < g.size(); ++i) out[slot[i]] = g[i];
    return out;
  }
};

}  // namespace

at::Tensor checkpoint(CheckpointFn fn, const at::Tensor& x, const std::vector<at::Tensor>& params,
                      const CheckpointOptions& options) {
  TORCH_CHECK(fn, "nn: checkpoint needs a function");
  TORCH_CHECK(x.defined(), "nn: checkpoint input is undefined");
  return CheckpointFunction::apply(x, at::TensorList(params), &fn, &options);
}

at::Tensor checkpoint_module(torch::nn::Module& module, CheckpointFn fn, const at::Tensor& x,
                             const CheckpointOptions& options) {
  return checkpoint(std::move(fn), x, module.parameters(), options);
}

bool is_checkpointed(int64_t block, int64_t num_blocks, const ActivationCheckpointingOptions& options) {
  TORCH_CHECK(block >= 0 && block < num_blocks, "nn: block ", block, " outside 0..", num_blocks - 1);
  if (!options.enabled) return false;
  XTRAIN_USAGE_CHECK(options.number_checkpoints != 0,
                     "nn: activation_checkpointing.number_checkpoints must be > 0 or null (all blocks) when "
                     "activation_checkpointing.enabled, got 0");
  if (options.number_checkpoints < 0) return true;
  return block < options.number_checkpoints;
}

CheckpointOptions checkpoint_options(const ActivationCheckpointingOptions& options) {
  XTRAIN_USAGE_CHECK(!options.profile, "nn: not supported yet: activation_checkpointing.profile=true");
  XTRAIN_USAGE_CHECK(!options.synchronize_checkpoint_boundary,
                     "nn: not supported yet: activation_checkpointing.synchronize_checkpoint_boundary=true");
  CheckpointOptions out;
  out.cpu_checkpointing = options.cpu_checkpointing;
  return out;
}

}  // namespace xtrain::nn
