// Helpers shared by the attention kernel tests: random q/k/v, forward + all gradients of a kernel
// for one upstream gradient, a float64 finite-difference gradient check, and a relative comparison
// whose absolute floor scales with the expected tensor (so near-zero elements do not dominate).
#pragma once
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace xtrain::testing {

using AttentionFn = std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v)>;

struct AttentionResult {
  at::Tensor out, dq, dk, dv;
};

// out = f(q, k, v) and the gradients of sum(out * dout) (dout: same shape as out).
inline AttentionResult run_with_grads(const AttentionFn& f, const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v, const at::Tensor& dout) {
  auto qg = q.detach().clone().requires_grad_(true);
  auto kg = k.detach().clone().requires_grad_(true);
  auto vg = v.detach().clone().requires_grad_(true);
  auto out = f(qg, kg, vg);
  out.backward(dout.to(out.scalar_type()));
  return {out.detach(), qg.grad(), kg.grad(), vg.grad()};
}

// |a - e| <= rel * (|e| + max(max|e|, 1)): relative to each element and to the tensor's scale, which
// is at least 1 because the tests' inputs are unit-variance (a gradient that vanishes exactly, as dq
// for a query with one visible key, comes out of fp32 as ~1e-7 of that unit scale).
inline bool expect_rel(const at::Tensor& actual, const at::Tensor& expected, double rel, const std::string& what) {
  const double scale = expected.numel() ? std::max(1.0, expected.abs().max().item<double>()) : 1.0;
  return expect_close(actual, expected, rel, rel * scale, what);
}

inline void expect_result(const AttentionResult& a, const AttentionResult& e, double rel, const std::string& what) {
  expect_rel(a.out, e.out, rel, what + " out");
  expect_rel(a.dq, e.dq, rel, what + " dq");
  expect_rel(a.dk, e.dk, rel, what + " dk");
  expect_rel(a.dv, e.dv, rel, what + " dv");
}

// Central differences of L = sum(f(q, k, v) * w) for every element of q, k, v (float64), against
// the analytic gradients; tolerance: O(eps²) truncation plus rounding of L / eps.
inline void gradcheck(const AttentionFn& f, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const std::string& what) {
  const auto w = at::randn(q.sizes(), q.options());
  const auto analytic = run_with_grads(f, q, k, v, w);
  std::vector<at::Tensor> inputs = {q.detach().clone(), k.detach().clone(), v.detach().clone()};
  const std::vector<at::Tensor> grads = {analytic.dq, analytic.dk, analytic.dv};
  const char* names[] = {"dq", "dk", "dv"};
  const double eps = 1e-6;
  for (int which = 0; which < 3; ++which) {
    auto numeric = at::empty_like(inputs[which]);
    double* x = inputs[which].data_ptr<double>();
    double* g = numeric.data_ptr<double>();
    for (int64_t e = 0; e < inputs[which].numel(); ++e) {
      const double keep = x[e];
      x[e] = keep + eps;
      const double plus = (f(inputs[0], inputs[1], inputs[2]) * w).sum().item<double>();
      x[e] = keep - eps;
      const double minus = (f(inputs[0], inputs[1], inputs[2]) * w).sum().item<double>();
      x[e] = keep;
      g[e] = (plus - minus) / (2 * eps);
    }
    expect_close(grads[which], numeric, 1e-6, 1e-8, what + " gradcheck " + names[which]);
  }
}

}  // namespace xtrain::testing
