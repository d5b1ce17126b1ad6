// kernels::linear (linear.h): LinearFunction over kernels::gemm. x is viewed as rows [M, in]; the
// weight is used transposed through its strides, never copied. Saves x and W for backward (as
// at::linear's autograd does), nothing else.
#include "xtrain/kernels/linear.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/sum.h>
#include <torch/csrc/autograd/custom_function.h>

#include "xtrain/kernels/gemm.h"

namespace xtrain::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [..., K] as rows [M, K]: a view when the strides allow it; a copy when neither matrix dim has unit
// stride (e.g. the expanded gradient of a sum).
at::Tensor rows(const at::Tensor& t) {
  auto r = t.dim() == 2 ? t : t.reshape({-1, t.size(-1)});
  const bool unit = r.stride(1) == 1 || r.stride(0) == 1 || r.size(0) == 1 || r.size(1) == 1;
  return unit && r.stride(0) != 0 && r.stride(1) != 0 ? r : r.contiguous();
}

// y [..., N] = x2 [M, K] · weightᵀ + bias, allocated in its final shape: a custom function must not
// return a view (autograd forbids in-place ops on those, and the residual add is one).
at::Tensor forward_rows(const at::Tensor& x2, const at::Tensor& weight, const at::Tensor& bias,
                        std::vector<int64_t> out_sizes) {
  out_sizes.back() = weight.size(0);
  auto y = at::empty(out_sizes, x2.options());
  GemmArgs args;
  args.bias = bias;
  gemm_out(y.view({x2.size(0), weight.size(0)}), x2, weight.t(), args);
  return y;
}

// The autograd function, with and without bias: LibTorch 1.13's custom functions cannot take an
// undefined tensor as an input (its VariableInfo asks for the device).
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight) {
    return save_and_run(ctx, x, weight, at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return gradients(ctx, grads, false); }

  static at::Tensor save_and_run(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias) {
    const auto x2 = rows(x);
    ctx->save_for_backward({x2, weight});
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    return forward_rows(x2, weight, bias, x.sizes().vec());
  }

  // dX = dY·W, dW = dYᵀ·X, db = ΣdY (rows), each only when its input wants a gradient.
  static variable_list gradients(AutogradContext* ctx, const variable_list& grads, bool has_bias) {
    const auto saved = ctx->get_saved_variables();
    const auto& x2 = saved[0];
    const auto& weight = saved[1];
    variable_list out(has_bias ? 3 : 2);
    if (!grads[0].defined()) return out;
    const auto dy = rows(grads[0]);
    if (ctx->needs_input_grad(0)) {
      out[0] = at::empty(ctx->saved_data["x_sizes"].toIntVector(), dy.options());
      gemm_out(out[0].view({dy.size(0), weight.size(1)}), dy, weight);
    }
    if (ctx->needs_input_grad(1)) out[1] = gemm(dy.t(), x2);
    if (has_bias && ctx->needs_input_grad(2)) out[2] = dy.sum(0);
    return out;
  }
};

struct LinearBiasFunction : public torch::autograd::Function<LinearBiasFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    return LinearFunction::save_and_run(ctx, x, weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return LinearFunction::gradients(ctx, grads, true);
  }
};

}  // namespace

at::Tensor linear(const at::Tensor& x_in, const at::Tensor& weight_in, const at::Tensor& bias_in) {
  at::Tensor x = x_in, weight = weight_in, bias = bias_in;
  if (at::autocast::is_cpu_enabled() && x.device().is_cpu()) {
    // What the AutocastCPU kernel of at::linear does (linear is on the lower-precision list): cast
    // fp32 arguments, the parameters through autocast's weight cache, under autograd.
    const auto dtype = at::autocast::get_autocast_cpu_dtype();
    x = at::autocast::cached_cast(dtype, x, c10::DeviceType::CPU);
    weight = at::autocast::cached_cast(dtype, weight, c10::DeviceType::CPU);
    if (bias.defined()) bias = at::autocast::cached_cast(dtype, bias, c10::DeviceType::CPU);
  }
  const bool routed = x.dim() >= 1 && weight.dim() == 2 && gemm_supports(x, weight) &&
                      (!bias.defined() || (bias.dim() == 1 && bias.device().is_cpu() &&
                                           bias.scalar_type() == x.scalar_type()));
  if (!routed) return bias.defined() ? at::linear(x, weight, bias) : at::linear(x, weight);
  TORCH_CHECK(x.size(-1) == weight.size(1), "linear: input has ", x.size(-1), " features, weight expects ",
              weight.size(1), " (input ", x.sizes(), ", weight ", weight.sizes(), ")");
  const bool needs_graph = at::GradMode::is_enabled() &&
                           (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (!needs_graph) return forward_rows(rows(x), weight, bias, x.sizes().vec());
  return bias.defined() ? LinearBiasFunction::apply(x, weight, bias) : LinearFunction::apply(x, weight);
}

}  // namespace xtrain::kernels
