// Mlp: fc -> gelu(tanh) -> proj -> dropout (nanoGPT's MLP).
#include "xtrain/nn/mlp.h"


#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"

namespace xtrain::nn {

MlpImpl::MlpImpl(int64_t C, double dropout) : dropout_(dropout) {
  XTRAIN_USAGE_CHECK(dropout >= 0 && dropout < 1, "nn: xtrain.model.dropout must be in [0, 1), got ", dropout);
  fc = register_module("fc", Linear(C, 4 * C));
  proj = register_module("proj", Linear(4 * C, C));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  auto y = proj->forward(kernels::gelu_tanh(fc->forward(x)));
  y = kernels::dropout(y, dropout_, is_training());
  return y;
}

}  // namespace xtrain::nn
