// kernels::linear (the routed custom autograd function) against float64 at::linear: output and the
// gradients of x, W and b for 2-D and 3-D inputs, without bias, with non-contiguous inputs and
// expanded incoming gradients, both GEMM backends; the in-place residual add on its output; bf16
// parameters; CPU autocast (computes in bf16 like at::linear under autocast); double falls back.
#include "xtrain/kernels/linear.h"

#include <ATen/Functions.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "xtrain/kernels/gemm.h"

namespace xtrain::kernels::linear_test {
namespace {

using xtrain::testing::expect_close;

struct Grads {
  at::Tensor y, dx, dw, db;
};

// y = linear(x, w, b); loss = Σ y·g for a fixed g; returns y and the three gradients.
Grads run(const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0, const at::Tensor& g, bool ours) {
  auto x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_();
  auto b = b0.defined() ? b0.detach().requires_grad_() : at::Tensor();
  auto y = ours ? linear(x, w, b) : (b.defined() ? at::linear(x, w, b) : at::linear(x, w));
  (y * g).sum().backward();
  return {y.detach(), x.grad(), w.grad(), b.defined() ? b.grad() : at::Tensor()};
}

void expect_matches_float64(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const std::string& what) {
  const auto g = at::randn(at::linear(x, w).sizes());
  const auto ours = run(x, w, b, g, true);
  auto d = [](const at::Tensor& t) { return t.defined() ? t.to(at::kDouble) : t; };
  const auto ref = run(d(x), d(w), d(b), d(g), false);
  // fp32 rounding of dot products of up to 96 (forward/dx) or M (dW, db) N(0,1) terms.
  const double rtol = 2e-5, atol = 2e-4;
  expect_close(ours.y, ref.y, rtol, atol, what + " y");
  expect_close(ours.dx, ref.dx, rtol, atol, what + " dx");
  expect_close(ours.dw, ref.dw, rtol, atol, what + " dW");
  if (b.defined()) expect_close(ours.db, ref.db, rtol, atol, what + " db");
}

TEST(Linear, ForwardAndEveryGradientMatchFloat64OnBothBackends) {
  torch::manual_seed(0);
  for (auto backend : {GemmBackend::kOneDnn, GemmBackend::kAten}) {
    set_gemm_backend(backend);
    const auto w = at::randn({40, 96}), b = at::randn({40});
    expect_matches_float64(at::randn({3, 11, 96}), w, b, "3-D");
    expect_matches_float64(at::randn({17, 96}), w, b, "2-D");
    expect_matches_float64(at::randn({17, 96}), w, at::Tensor(), "no bias");
    expect_matches_float64(at::randn({96, 5, 2}).permute({2, 1, 0}), w, b, "permuted x");
    expect_matches_float64(at::randn({96}), w, b, "1-D x");
  }
  set_gemm_backend(GemmBackend::kAuto);
}

TEST(Linear, ExpandedGradientAndInPlaceResidualAdd) {
  torch::manual_seed(1);
  auto x = at::randn({4, 6, 16}).requires_grad_(), w = at::randn({16, 16}).requires_grad_();
  auto b = at::randn({16}).requires_grad_();
  // y + x in place on our output (Block's residual), then sum(): the incoming gradient is expanded.
  auto y = linear(x, w, b).add_(x);
  y.sum().backward();
  auto xr = x.detach().to(at::kDouble).requires_grad_(), wr = w.detach().to(at::kDouble).requires_grad_();
  auto br = b.detach().to(at::kDouble).requires_grad_();
  (at::linear(xr, wr, br) + xr).sum().backward();
  expect_close(x.grad(), xr.grad(), 2e-5, 1e-4, "dx with residual");  // fp32 sums of 16 / 24 terms
  expect_close(w.grad(), wr.grad(), 2e-5, 1e-4, "dW");
  expect_close(b.grad(), br.grad(), 2e-5, 1e-4, "db");
}

TEST(Linear, Bf16ParametersComputeInBf16) {
  torch::manual_seed(2);
  const auto x = at::randn({8, 32}).to(at::kBFloat16), w = at::randn({24, 32}).to(at::kBFloat16);
  const auto b = at::randn({24}).to(at::kBFloat16);
  const auto g = at::randn({8, 24}).to(at::kBFloat16);
  const auto ours = run(x, w, b, g, true);
  EXPECT_EQ(ours.y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(ours.dw.scalar_type(), at::kBFloat16);
  auto d = [](const at::Tensor& t) { return t.to(at::kDouble); };
  const auto ref = run(d(x), d(w), d(b), d(g), false);
  // Exact bf16 products summed in fp32, one rounding to bf16 (2^-8 relative) at the end.
  expect_close(ours.y.to(at::kFloat), ref.y, 8e-3, 2e-2, "bf16 y");
  expect_close(ours.dx.to(at::kFloat), ref.dx, 8e-3, 2e-2, "bf16 dx");
  expect_close(ours.dw.to(at::kFloat), ref.dw, 8e-3, 2e-2, "bf16 dW");
  expect_close(ours.db.to(at::kFloat), ref.db, 8e-3, 2e-2, "bf16 db");
}

TEST(Linear, CpuAutocastComputesInBf16LikeAtLinear) {
  torch::manual_seed(3);
  auto x = at::randn({5, 7, 32}), w = at::randn({12, 32}).requires_grad_();
  auto b = at::randn({12}).requires_grad_();
  at::Tensor ours, theirs;
  at::autocast::set_cpu_enabled(true);
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  ours = linear(x, w, b);
  theirs = at::linear(x, w, b);
  at::autocast::set_cpu_enabled(false);
  at::autocast::clear_cache();
  EXPECT_EQ(ours.scalar_type(), theirs.scalar_type());
  EXPECT_EQ(ours.scalar_type(), at::kBFloat16);
  // Both multiply the same bf16-rounded inputs exactly, sum in fp32 and round once to bf16.
  expect_close(ours.to(at::kFloat), theirs.to(at::kFloat), 8e-3, 2e-2, "autocast output");
  ours.to(at::kFloat).sum().backward();
  EXPECT_EQ(w.grad().scalar_type(), at::kFloat);  // through the cast: fp32 parameters get fp32 gradients
  EXPECT_TRUE(w.grad().isfinite().all().item<bool>());
}

TEST(Linear, DoubleFallsBackToAtLinear) {
  const auto x = at::randn({3, 8}, at::kDouble), w = at::randn({4, 8}, at::kDouble), b = at::randn({4}, at::kDouble);
  EXPECT_TRUE(at::equal(linear(x, w, b), at::linear(x, w, b)));
}

}  // namespace
}  // namespace xtrain::kernels::linear_test
