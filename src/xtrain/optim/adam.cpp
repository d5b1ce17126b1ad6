// Adam/AdamW step: per-group coefficients in double (as torch.optim computes them in Python), then
// the moments strategy's fused update over every segment. The fp32 moments (here): the CPU kernels
// in parallel (cpu/kernels.h), or, with a CUDA LibTorch and params on a GPU, one CUDA launch per run
// of adjacent same-group segments. The 8-bit moments: adam8bit.cpp.
#include "xtrain/optim/adam.h"

#include <ATen/ops/zeros.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/optim/adam8bit.h"
#include "xtrain/optim/flat_step.h"
#include "xtrain/optim/registry.h"
#ifdef XTRAIN_WITH_CUDA
#include "xtrain/optim/cuda/adamw_cuda.h"
#endif

namespace xtrain::optim {

namespace {

#ifdef XTRAIN_WITH_CUDA
constexpr bool kCuda = true;

void step_cuda(const std::vector<Segment>& segments, const std::vector<cpu::AdamCoeffs>& coeffs, const StepInputs& in,
               const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq) {
  size_t s = 0;
  while (s < segments.size()) {
    const int64_t begin = segments[s].offset;
    int64_t end = begin + segments[s].numel;
    size_t t = s + 1;
    for (; t < segments.size() && segments[t].group == segments[s].group && segments[t].offset == end; ++t) {
      end += segments[t].numel;
    }
    cuda::adam_update(coeffs[segments[s].group], in.params, in.grads, exp_avg, exp_avg_sq, in.params_lowp, begin, end);
    s = t;
  }
}
#else
constexpr bool kCuda = false;
#endif

class Fp32Moments final : public AdamMoments {
 public:
  void init(int64_t numel) override {
    exp_avg_ = at::zeros({numel}, at::kFloat);
    exp_avg_sq_ = at::zeros({numel}, at::kFloat);
  }
  int64_t numel() const override { return exp_avg_.defined() ? exp_avg_.numel() : -1; }
  bool allows_cuda() const override { return kCuda; }
  std::string describe(const std::string& optimizer_name) const override { return optimizer_name; }

  void update(const StepInputs& in, const std::vector<Segment>& segments,
              const std::vector<cpu::AdamCoeffs>& coeffs) override {
    if (exp_avg_.device() != in.params.device()) {  // the state follows the params (GPU runs)
      exp_avg_ = exp_avg_.to(in.params.device());
      exp_avg_sq_ = exp_avg_sq_.to(in.params.device());
    }
#ifdef XTRAIN_WITH_CUDA
    if (in.params.is_cuda()) {
      step_cuda(segments, coeffs, in, exp_avg_, exp_avg_sq_);
      return;
    }
#endif
    const auto buffers = detail::flat_buffers(in, exp_avg_, exp_avg_sq_);
    detail::parallel_over_segments(segments, [&](size_t s, int64_t begin, int64_t end) {
      cpu::adam_update(coeffs[segments[s].group], buffers, begin, end);
    });
  }

  std::vector<std::pair<std::string, at::Tensor>> tensors() override {
    return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
  }

 private:
  at::Tensor exp_avg_, exp_avg_sq_;
};

std::unique_ptr<AdamMoments> moments_for(const std::string& state_dtype) {
  if (state_dtype == "int8") return int8_adam_moments();
  return fp32_adam_moments();
}

}  // namespace

std::unique_ptr<AdamMoments> fp32_adam_moments() { return std::make_unique<Fp32Moments>(); }

Adam::Adam(const AdamParams& params, bool decoupled, std::string name)
    : Adam(params, decoupled, std::move(name), moments_for(params.state_dtype)) {}

Adam::Adam(const AdamParams& params, bool decoupled, std::string name, std::unique_ptr<AdamMoments> moments)
    : params_(params), decoupled_(decoupled), name_(std::move(name)), moments_(std::move(moments)) {}

void Adam::init_state(int64_t numel) { moments_->init(numel); }

std::vector<cpu::AdamCoeffs> adam_coefficients(const AdamParams& params, bool decoupled, int64_t step_count,
                                               const StepInputs& in) {
  const auto groups = detail::groups_or(in, params.lr, params.weight_decay);
  const auto [beta1, beta2] = detail::step_betas(in, params.betas);
  const double t = static_cast<double>(step_count + 1);
  const double bc1 = params.bias_correction ? 1.0 - std::pow(beta1, t) : 1.0;
  const double bc2 = params.bias_correction ? 1.0 - std::pow(beta2, t) : 1.0;
  std::vector<cpu::AdamCoeffs> coeffs;
  for (const auto& g : groups) {
    cpu::AdamCoeffs c;
    c.grad_scale = static_cast<float>(in.grad_scale);
    c.l2 = decoupled ? 0.f : static_cast<float>(g.weight_decay);
    c.decay_mul = decoupled ? static_cast<float>(1.0 - g.lr * g.weight_decay) : 1.f;
    c.beta1 = static_cast<float>(beta1);
    c.one_minus_beta1 = static_cast<float>(1.0 - beta1);
    c.beta2 = static_cast<float>(beta2);
    c.one_minus_beta2 = static_cast<float>(1.0 - beta2);
    c.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    c.eps = static_cast<float>(params.eps);
    c.neg_step_size = static_cast<float>(-(g.lr / bc1));
    coeffs.push_back(c);
  }
  return coeffs;
}

void Adam::step(const StepInputs& in) {
  std::vector<Segment> whole;
  const auto& segments =
      detail::checked_segments(in, moments_->numel(), moments_->describe(name_), whole, moments_->allows_cuda());
  moments_->update(in, segments, adam_coefficients(params_, decoupled_, step_count_, in));
  ++step_count_;
}

std::vector<std::pair<std::string, at::Tensor>> Adam::state() { return moments_->tensors(); }

namespace {

std::unique_ptr<Optimizer> make_adam(const OptimizerOptions& o, bool always_decoupled, const char* name) {
  const auto& a = o.adam;
  check_betas(a.betas);
  check_eps(a.eps);
  XTRAIN_USAGE_CHECK(!a.amsgrad, "optim: not supported yet: optimizer.params.amsgrad");
  XTRAIN_USAGE_CHECK(a.state_dtype == "fp32" || a.state_dtype == "int8",
                     "optim: optimizer.params.state_dtype must be \"fp32\" or \"int8\", got \"", a.state_dtype, "\"");
  return std::make_unique<Adam>(a, always_decoupled || a.adam_w_mode, name);
}

OptimizerEntry adam_family(const char* name, bool always_decoupled) {
  OptimizerEntry e;
  e.config = config::optimizer_types().find(name, "optimizer.type");
  e.state_names = {"exp_avg", "exp_avg_sq"};
  e.zero = ZeroSupport::tested;
  e.make = [always_decoupled, name](const OptimizerOptions& o) { return make_adam(o, always_decoupled, name); };
  return e;
}

}  // namespace

OptimizerEntry adam_entry() { return adam_family("Adam", false); }
OptimizerEntry adamw_entry() { return adam_family("AdamW", true); }

}  // namespace xtrain::optim
