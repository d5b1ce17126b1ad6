// nn::LayerNorm: one fused at::layer_norm call. bf16 on the CPU is normalised in fp32 (as PyTorch's
// CPU autocast does): ATen 1.13's bf16 kernel is ~10x slower than two casts and the fp32 kernel.
#include "xtrain/nn/layer_norm.h"

#include <ATen/ops/layer_norm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include "xtrain/base/error.h"

namespace xtrain::nn {

LayerNormImpl::LayerNormImpl(int64_t C, double eps) : C_(C), eps_(eps) {
  XTRAIN_USAGE_CHECK(C > 0, "nn: LayerNorm width must be > 0, got ", C);
  weight = register_parameter("weight", at::ones({C}));
  bias = register_parameter("bias", at::zeros({C}));
}

at::Tensor LayerNormImpl::forward(const at::Tensor& x) {
  if (x.scalar_type() == at::kBFloat16 && x.is_cpu()) {
    return at::layer_norm(x.to(at::kFloat), {C_}, weight.to(at::kFloat), bias.to(at::kFloat), eps_).to(at::kBFloat16);
  }
  return at::layer_norm(x, {C_}, weight, bias, eps_);
}

}  // namespace xtrain::nn
