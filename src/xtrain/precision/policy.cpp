#include "xtrain/precision/policy.h"

#include <ATen/autocast_mode.h>

#include "xtrain/base/error.h"

namespace xtrain::precision {

std::string PrecisionPolicy::describe() const {
  if (autocast()) return c10::str("autocast ", c10::toString(autocast_dtype), " (fp32 parameters)");
  if (!mixed()) return "fp32";
  return c10::str(c10::toString(param_dtype), " parameters/activations, fp32 master weights and optimizer state",
                  loss_scaling ? ", loss scaling" : "", ", ", grad_accum_dtype == c10::kFloat ? "fp32" : c10::toString(grad_accum_dtype), " gradient accumulation");
}

PrecisionPolicy make_policy(const Fp16Options& fp16, const Bf16Options& bf16, const AmpOptions& amp, bool cuda,
                            const std::string& grad_accum_dtype) {
  XTRAIN_USAGE_CHECK(!(fp16.enabled && bf16.enabled),
                     "precision: fp16.enabled and bf16.enabled are both true; choose one (bf16 needs no loss scaling)");
  XTRAIN_USAGE_CHECK(!(fp16.enabled && amp.enabled), "precision: fp16.enabled and amp.enabled together are not allowed"
                     " (use fp16.auto_cast for autocast with loss scaling)");
  PrecisionPolicy p;
  const bool amp_on = amp.enabled || (fp16.enabled && fp16.auto_cast);
  if (amp_on) {
    c10::ScalarType dtype = cuda ? c10::kHalf : c10::kBFloat16;
    if (amp.dtype == "bf16") dtype = c10::kBFloat16;
    if (amp.dtype == "fp16" || fp16.auto_cast) dtype = c10::kHalf;
    // fp16.auto_cast forces fp16 whatever amp.dtype says, so amp.dtype cannot fix it.
    XTRAIN_USAGE_CHECK(cuda || !fp16.auto_cast,
                       "precision: fp16.auto_cast runs the forward in fp16 autocast, which needs CUDA (LibTorch has no "
                       "fp16 matmul on CPU); on CPU use \"bf16\": {\"enabled\": true} instead of fp16, or bf16 autocast: "
                       "\"amp\": {\"enabled\": true, \"dtype\": \"bf16\"} with fp16.enabled false (fp16.auto_cast)");
    XTRAIN_USAGE_CHECK(cuda || dtype == c10::kBFloat16,
                       "precision: CPU autocast supports bf16 only; use amp.dtype \"bf16\" (or \"auto\") (amp.dtype)");
    p.autocast_dtype = dtype;
    p.loss_scaling = dtype == c10::kHalf;
    return p;
  }
  if (bf16.enabled) p.param_dtype = c10::kBFloat16;
  if (fp16.enabled) {
    p.param_dtype = c10::kHalf;
    p.loss_scaling = true;
  }
  if (grad_accum_dtype == "bf16") p.grad_accum_dtype = c10::kBFloat16;
  if (grad_accum_dtype == "fp16") p.grad_accum_dtype = c10::kHalf;
  return p;
}

void check_cpu_supported(const PrecisionPolicy& p) {
  XTRAIN_USAGE_CHECK(p.param_dtype != c10::kHalf && p.autocast_dtype != c10::kHalf,
                     "precision: fp16 compute needs CUDA (LibTorch has no fp16 matmul on CPU); on CPU use "
                     "\"bf16\": {\"enabled\": true} instead (fp16.enabled)");
}

AutocastGuard::AutocastGuard(c10::ScalarType dtype, bool cuda) : cuda_(cuda) {
  if (dtype == c10::kFloat) return;
  active_ = true;
  if (cuda_) {
    prev_enabled_ = at::autocast::is_enabled();
    prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    prev_enabled_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (cuda_) {
    at::autocast::set_enabled(prev_enabled_);
    at::autocast::set_autocast_gpu_dtype(prev_dtype_);
  } else {
    at::autocast::set_cpu_enabled(prev_enabled_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  }
}

}  // namespace xtrain::precision
