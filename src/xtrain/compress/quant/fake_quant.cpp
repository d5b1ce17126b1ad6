// The two fake-quant functions as autograd Functions: forward in ATen ops, backward a mask.
#include "xtrain/compress/quant/fake_quant.h"

#include <ATen/Functions.h>
#include <torch/csrc/autograd/custom_function.h>

namespace xtrain::compress {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x: any shape; inv_scale and zero_point broadcast against it (scalars or [C, 1, ...]).
struct FakeQuant : public torch::autograd::Function<FakeQuant> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& scale, double zero_point,
                            int64_t qmin, int64_t qmax) {
    const auto q = at::round(x * scale.reciprocal()).add_(zero_point);
    const auto inside = q.ge(static_cast<double>(qmin)).logical_and_(q.le(static_cast<double>(qmax)));
    ctx->save_for_backward({inside});
    return q.clamp(qmin, qmax).sub_(zero_point).mul_(scale);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto inside = ctx->get_saved_variables()[0];
    return {grads[0] * inside, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fake_quantize_per_tensor(const at::Tensor& x, float scale, int64_t zero_point, int64_t qmin, int64_t qmax) {
  const auto s = at::full({}, scale, x.options().dtype(at::kFloat));
  return FakeQuant::apply(x, s, static_cast<double>(zero_point), qmin, qmax);
}

at::Tensor fake_quantize_per_channel(const at::Tensor& w, const at::Tensor& scale, int64_t qmin, int64_t qmax) {
  TORCH_CHECK(scale.dim() == 1 && scale.size(0) == w.size(0), "compress: per-channel scale must be [", w.size(0),
              "], got ", scale.sizes());
  std::vector<int64_t> shape(w.dim(), 1);
  shape[0] = w.size(0);
  return FakeQuant::apply(w, scale.detach().to(at::kFloat).view(shape), 0.0, qmin, qmax);
}

}  // namespace xtrain::compress
