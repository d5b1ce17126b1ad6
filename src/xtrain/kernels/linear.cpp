// kernels::linear: at::linear for now (see linear.h). Kept out of the header so that changing the
// GEMM backend recompiles one file.
#include "xtrain/kernels/linear.h"

#include <ATen/ops/linear.h>

namespace xtrain::kernels {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!bias.defined()) return at::linear(x, weight);
  return at::linear(x, weight, bias);
}

}  // namespace xtrain::kernels
