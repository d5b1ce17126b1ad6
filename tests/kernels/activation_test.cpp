// The fused tanh-GELU against its closed form in float64 (value and derivative), in fp32 and bf16,
// over the whole range (tails of ±100, exact zero), odd sizes (vector tails), non-contiguous
// inputs, and through autograd. The hash-mask dropout: keep rate, scale, the same mask in backward,
// replay under the same manual_seed, independence of the thread count, identity when off.
#include "xtrain/kernels/activation.h"

#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <ATen/Parallel.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/base/cpu_isa.h"

namespace xtrain::kernels::activation_test {
namespace {

using xtrain::testing::expect_close;

// The fused kernel runs on AVX-512 CPUs; elsewhere gelu_tanh is ATen's gelu (its 1 + tanh cancels in
// the negative tail, and bf16 rounds inside), which these accuracy bounds do not describe.
#define XTRAIN_SKIP_UNLESS_FUSED_GELU()                                                       \
  if (base::best_cpu_isa() != base::Isa::kAvx512) GTEST_SKIP() << "the fused GELU needs AVX-512; " \
                                                                   "this CPU runs ATen's gelu"

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
  XTRAIN_SKIP_UNLESS_FUSED_GELU();
  for (int64_t n : {1, 15, 16, 17, 1000, 70001}) {  // vector tails and the parallel split
    const auto x = inputs(std::max<int64_t>(n, 9)).narrow(0, 0, n).contiguous();
    const auto g = at::randn({n});
    expect_close(gelu_tanh_forward(x).to(at::kDouble), gelu_ref(x), 1e-6, 1e-7, "forward n=" + std::to_string(n));
    expect_close(gelu_tanh_backward(g, x).to(at::kDouble), g.to(at::kDouble) * gelu_grad_ref(x), 1e-5, 1e-6,
                 "backward n=" + std::to_string(n));
  }
}

TEST(GeluTanh, Bf16IsTheRoundedFloat64Result) {
  XTRAIN_SKIP_UNLESS_FUSED_GELU();
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

TEST(Dropout, KeepRateScaleAndTheSameMaskInBackward) {
  at::manual_seed(11);
  const int64_t n = 1 << 20;
  const double p = 0.1;
  auto x = (at::rand({n}) + 0.5).requires_grad_(true);  // no zeros: a zero output means dropped
  const auto y = kernels::dropout(x, p, /*train=*/true);
  const auto kept = y.detach().ne(0);
  // Binomial(n, 0.9): the keep rate within 5 standard deviations (sd = sqrt(p(1-p)/n) = 2.9e-4).
  const double rate = kept.to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(rate, 1 - p, 5 * std::sqrt(p * (1 - p) / n));
  // Kept values are x / (1 - p) exactly as fp32 computes it; dropped ones are 0.
  const auto expect = at::where(kept, x.detach() * static_cast<float>(1 / (1 - p)), at::zeros_like(x));
  expect_close(y.detach(), expect, 0, 0, "dropout values");
  // Backward: grad·mask/(1−p) with the forward's mask (regenerated, not stored).
  const auto g = at::randn({n});
  y.backward(g);
  expect_close(x.grad(), at::where(kept, g * static_cast<float>(1 / (1 - p)), at::zeros_like(g)), 0, 0, "dropout grad");
  // Neighbouring elements are not correlated (each pair shares one hash): P(both kept) ≈ 0.81.
  const auto pairs = kept.view({-1, 2});
  const double both = pairs.all(1).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(both, (1 - p) * (1 - p), 5 * std::sqrt(0.81 * 0.19 / (n / 2)));
}

TEST(Dropout, ReplaysUnderTheSameSeedAndIgnoresThreads) {
  const auto x = at::randn({3, 1000, 7});
  at::manual_seed(5);
  const auto a = kernels::dropout(x, 0.3, true);
  const auto b = kernels::dropout(x, 0.3, true);
  EXPECT_FALSE(at::equal(a, b)) << "two calls draw two masks";
  at::manual_seed(5);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto c = kernels::dropout(x, 0.3, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(a, c)) << "same seed, one thread: the same mask";
  const auto xb = x.to(at::kBFloat16);
  at::manual_seed(5);
  const auto d = kernels::dropout(xb, 0.3, true);
  ASSERT_EQ(d.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(d.ne(0), a.ne(0) | x.to(at::kBFloat16).eq(0))) << "bf16 uses the same mask";
  EXPECT_TRUE(kernels::dropout(x, 0.3, /*train=*/false).is_same(x));
  EXPECT_TRUE(kernels::dropout(x, 0.0, true).is_same(x));
  EXPECT_EQ(dropout_with_seed(x, 0.0, 1).ne(x).sum().item<int64_t>(), 0);
}

}  // namespace
}  // namespace xtrain::kernels::activation_test
