// The fused tanh-GELU against its closed form in float64 (value and derivative), in fp32 and bf16,
// over the whole range (tails of ±100, exact zero), odd sizes (vector tails), non-contiguous
// inputs, and through autograd.
#include "xtrain/kernels/activation.h"

#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include "support/fixtures.h"

namespace xtrain::kernels {
namespace {

using xtrain::testing::expect_close;

// 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))) and its derivative, in float64.
at::Tensor gelu_ref(const at::Tensor& x) {
  const auto d = x.to(at::kDouble);
  return 0.5 * d * (1 + at::tanh(std::sqrt(2 / M_PI) * (d + 0.044715 * d.pow(3))));
}
at::Tensor gelu_grad_ref(const at::Tensor& x) {
  const auto d = x.to(at::kDouble);
  const auto t = at::tanh(std::sqrt(2 / M_PI) * (d + 0.044715 * d.pow(3)));
  return 0.5 * (1 + t) + 0.5 * d * (1 - t * t) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * d * d);
}

at::Tensor inputs(int64_t n) {
  at::manual_seed(7);
  auto x = at::randn({n}) * 3;
  // The tails (σ saturates, exp clamps), zero and values near it.
  const auto fixed = at::tensor({-100.f, -20.f, -9.f, -1e-3f, 0.f, 1e-3f, 9.f, 20.f, 100.f});
  x.narrow(0, 0, fixed.numel()).copy_(fixed);
  return x;
}

TEST(GeluTanh, Fp32MatchesTheClosedForm) {
  for (int64_t n : {1, 15, 16, 17, 1000, 70001}) {  // vector tails and the parallel split
    const auto x = inputs(std::max<int64_t>(n, 9)).narrow(0, 0, n).contiguous();
    const auto g = at::randn({n});
    expect_close(gelu_tanh_forward(x).to(at::kDouble), gelu_ref(x), 1e-6, 1e-7, "forward n=" + std::to_string(n));
    expect_close(gelu_tanh_backward(g, x).to(at::kDouble), g.to(at::kDouble) * gelu_grad_ref(x), 1e-5, 1e-6,
                 "backward n=" + std::to_string(n));
  }
}

TEST(GeluTanh, Bf16IsTheRoundedFloat64Result) {
  const auto x = inputs(4099).to(at::kBFloat16);
  const auto g = at::randn({4099}).to(at::kBFloat16);
  const auto y = gelu_tanh_forward(x);
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  // One rounding of a value accurate to ~1e-6: within half a bf16 ulp (2^-8 relative) plus slack.
  expect_close(y.to(at::kDouble), gelu_ref(x), 4e-3, 1e-6, "bf16 forward");
  const auto gx = gelu_tanh_backward(g, x);
  expect_close(gx.to(at::kDouble), g.to(at::kDouble) * gelu_grad_ref(x), 4e-3, 1e-6, "bf16 backward");
}

TEST(GeluTanh, NonContiguousInputAndAutograd) {
  const auto base = at::randn({64, 48}, at::kDouble).to(at::kFloat);
  const auto x = base.t().contiguous().t();  // strides (1, 64): not contiguous
  ASSERT_FALSE(x.is_contiguous());
  auto leaf = x.detach().requires_grad_(true);
  const auto y = gelu_tanh(leaf);
  EXPECT_EQ(y.sizes(), x.sizes());
  const auto w = at::randn({64, 48});
  (y * w).sum().backward();
  expect_close(y.detach().to(at::kDouble), gelu_ref(x), 1e-6, 1e-7, "autograd forward");
  expect_close(leaf.grad().to(at::kDouble), w.to(at::kDouble) * gelu_grad_ref(x), 1e-5, 1e-6, "autograd grad");
}

}  // namespace
}  // namespace xtrain::kernels
