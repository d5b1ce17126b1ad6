// Mlp: fc -> gelu(tanh) -> proj -> dropout (nanoGPT's MLP).
#include "xtrain/nn/mlp.h"

#include <ATen/ops/dropout.h>
#include <ATen/ops/gelu.h>

#include "xtrain/base/error.h"

namespace xtrain::nn {

MlpImpl::MlpImpl(int64_t C, double dropout) : dropout_(dropout) {
  XTRAIN_USAGE_CHECK(dropout >= 0 && dropout < 1, "nn: xtrain.model.dropout must be in [0, 1), got ", dropout);
  fc = register_module("fc", Linear(C, 4 * C));
  proj = register_module("proj", Linear(4 * C, C));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  auto y = proj->forward(at::gelu(fc->forward(x), "tanh"));
  if (dropout_ > 0 && is_training()) y = at::dropout(y, dropout_, /*train=*/true);
  return y;
}

}  // namespace xtrain::nn
