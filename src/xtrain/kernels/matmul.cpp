// kernels::matmul (matmul.h): MatmulFunction over kernels::gemm. Saves both inputs for backward,
// as at::matmul's autograd does; an operand whose last two dims both lack unit stride, or that has
// a zero stride (an expanded gradient), is made contiguous first, since gemm reads only matrices
// with unit stride in one of their last two dims.
#include "xtrain/kernels/matmul.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/matmul.h>
#include <torch/csrc/autograd/custom_function.h>

#include "xtrain/kernels/gemm.h"

namespace xtrain::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor operand(const at::Tensor& t) {
  const int64_t n = t.dim();
  bool zero = false;
  for (int64_t d = 0; d < n; ++d) zero = zero || (t.stride(d) == 0 && t.size(d) > 1);
  const bool unit = t.stride(n - 1) == 1 || t.stride(n - 2) == 1;
  return unit && !zero ? t : t.contiguous();
}

at::Tensor routed_mm(const at::Tensor& a, const at::Tensor& b) { return gemm(operand(a), operand(b)); }

struct MatmulFunction : public torch::autograd::Function<MatmulFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    return routed_mm(a, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    variable_list out(2);
    if (!grads[0].defined()) return out;
    if (ctx->needs_input_grad(0)) out[0] = routed_mm(grads[0], saved[1].transpose(-2, -1));
    if (ctx->needs_input_grad(1)) out[1] = routed_mm(saved[0].transpose(-2, -1), grads[0]);
    return out;
  }
};

}  // namespace

bool matmul_routed(const at::Tensor& a, const at::Tensor& b) {
  const int64_t n = a.dim();
  if (n < 3 || n > 6 || b.dim() != n || a.numel() == 0 || b.numel() == 0 || !gemm_supports(a, b)) return false;
  if (at::autocast::is_cpu_enabled()) return false;
  return a.sizes().slice(0, n - 2) == b.sizes().slice(0, n - 2) && a.size(-1) == b.size(-2);
}

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  if (!matmul_routed(a, b)) return at::matmul(a, b);
  const bool needs_graph = at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
  return needs_graph ? MatmulFunction::apply(a, b) : routed_mm(a, b);
}

}  // namespace xtrain::kernels
