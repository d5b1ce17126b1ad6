// nn::Linear over kernels::linear; init as torch.nn.Linear.reset_parameters().
#include "xtrain/nn/linear.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <torch/nn/init.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/kernels/linear.h"

namespace xtrain::nn {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias) {
  XTRAIN_USAGE_CHECK(in_features > 0 && out_features > 0, "nn: Linear sizes must be > 0, got ", in_features,
                     " -> ", out_features);
  weight = register_parameter("weight", at::empty({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", at::empty({out_features}));
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(weight.size(1)));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

at::Tensor LinearImpl::forward(const at::Tensor& x) { return kernels::linear(x, weight, bias); }

}  // namespace xtrain::nn
