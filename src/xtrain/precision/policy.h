// PrecisionPolicy: which dtype each kind of tensor has, decided once from fp16 / bf16 / amp.
// Mixed precision (bf16.enabled / fp16.enabled): parameters, activations and gradients in the low
// type, an fp32 master copy and fp32 optimizer state. AMP (fp16.auto_cast / amp.enabled): fp32
// parameters, low-precision compute inside autocast regions (PyTorch AMP semantics).
#pragma once
#include <c10/core/ScalarType.h>

#include <string>

#include "xtrain/precision/options.h"

namespace xtrain::precision {

struct PrecisionPolicy {
  c10::ScalarType param_dtype = c10::kFloat;    // what the model's parameters hold
  c10::ScalarType master_dtype = c10::kFloat;   // optimizer's copy
  c10::ScalarType grad_accum_dtype = c10::kFloat;  // accumulation across micro-batches
  c10::ScalarType autocast_dtype = c10::kFloat;  // != kFloat: run forward under autocast
  bool loss_scaling = false;                     // fp16: dynamic or static loss scale
  bool mixed() const { return param_dtype != master_dtype; }
  bool autocast() const { return autocast_dtype != c10::kFloat; }
  std::string describe() const;
};

// `cuda`: whether training runs on a CUDA device. fp16 compute on CPU is a UsageError suggesting
// bf16 (LibTorch 1.13 has no CPU fp16 matmul); bf16 + fp16 together is a UsageError.
// `grad_accum_dtype` is data_types.grad_accum_dtype ("" = fp32).
PrecisionPolicy make_policy(const Fp16Options& fp16, const Bf16Options& bf16, const AmpOptions& amp, bool cuda,
                            const std::string& grad_accum_dtype);

// fp16 compute needs CUDA: for callers that know the model does matmuls on CPU.
void check_cpu_supported(const PrecisionPolicy& policy);

// RAII: CPU (bf16) or CUDA (fp16/bf16) autocast for the scope, as torch.autocast does; clears the
// autocast weight cache on exit.
class AutocastGuard {
 public:
  AutocastGuard(c10::ScalarType dtype, bool cuda);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false, cuda_ = false, prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = c10::kFloat;
};

}  // namespace xtrain::precision
