// nn::LayerNorm: one fused at::layer_norm call.
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

at::Tensor LayerNormImpl::forward(const at::Tensor& x) { return at::layer_norm(x, {C_}, weight, bias, eps_); }

}  // namespace xtrain::nn
