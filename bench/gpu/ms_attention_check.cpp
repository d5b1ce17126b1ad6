// GPU check and benchmark (not a test; run by bench/gpu/ms_attention_check.sh on a lent GPU): the
// CUDA multi-scale attention kernel (ms_fused_cuda) against the dense masked reference computed in
// float64 on the CPU, forward and every input gradient, fp32/bf16/fp16, causal and bidirectional,
// T from 1 to 1000, with dropout (the same hash mask); then forward + backward time against dense
// causal attention on the same GPU (the ATen composite and, with LibTorch 2.x,
// scaled_dot_product_attention) at NH = 8, HS = 64, bf16. Exit status 1 when a check fails.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/kernels/attention/dense_reference.h"
#include "xtrain/kernels/ms_attention/cuda/ms_attention_cuda.h"
#include "xtrain/kernels/ms_attention/reference.h"

namespace {

using xtrain::kernels::ms_attention::ms_attention_cuda;
using xtrain::kernels::ms_attention::ms_attention_reference;

struct Grads {
  std::vector<at::Tensor> t;  // out, dq, dk, dv
};

Grads run(const std::function<at::Tensor(at::Tensor, at::Tensor, at::Tensor)>& f, const at::Tensor& q,
          const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout) {
  auto qg = q.detach().clone().requires_grad_(true), kg = k.detach().clone().requires_grad_(true);
  auto vg = v.detach().clone().requires_grad_(true);
  auto y = f(qg, kg, vg);
  y.backward(dout.to(y.scalar_type()).to(y.device()));
  return {{y.detach().cpu().to(at::kDouble), qg.grad().cpu().to(at::kDouble), kg.grad().cpu().to(at::kDouble),
           vg.grad().cpu().to(at::kDouble)}};
}

// Largest |a - e| over max(1, max|e|), per tensor.
bool compare(const Grads& a, const Grads& e, double tol, const std::string& what) {
  const char* names[] = {"out", "dq", "dk", "dv"};
  bool ok = true;
  std::printf("check %-44s", what.c_str());
  for (int i = 0; i < 4; ++i) {
    const double scale = std::max(1.0, e.t[i].abs().max().item<double>());
    const double err = (a.t[i] - e.t[i]).abs().max().item<double>() / scale;
    std::printf(" %s %.1e", names[i], err);
    ok = ok && err <= tol;
  }
  std::printf("  %s\n", ok ? "ok" : "FAILED");
  return ok;
}

bool checks() {
  bool ok = true;
  struct Case {
    int64_t T;
    std::vector<int64_t> windows;
    int64_t HS;
  };
  const std::vector<Case> cases = {{1, {4}, 64}, {7, {2, 3}, 20}, {100, {8, 16}, 64}, {1000, {8, 16}, 64},
                                   {333, {5}, 128}};
  const std::vector<std::pair<at::ScalarType, double>> dtypes = {
      {at::kFloat, 1e-4}, {at::kBFloat16, 3e-2}, {at::kHalf, 1e-2}};  // fp32: atomics + expf; 16-bit: rounding
  for (const auto& c : cases) {
    for (bool causal : {true, false}) {
      at::manual_seed(static_cast<uint64_t>(c.T));
      const int64_t NH = 2 * static_cast<int64_t>(c.windows.size());
      const auto q = at::randn({2, NH, c.T, c.HS}, at::kDouble), k = at::randn({2, NH, c.T, c.HS}, at::kDouble);
      const auto v = at::randn({2, NH, c.T, c.HS}, at::kDouble), dout = at::randn({2, NH, c.T, c.HS}, at::kDouble);
      for (const auto& dt : dtypes) {
        const at::ScalarType dtype = dt.first;
        const double tol = dt.second;
        const auto cast = [&](const at::Tensor& x) { return x.to(dtype); };
        // The reference sees the same rounded inputs as the kernel.
        const auto ref = run([&](at::Tensor a, at::Tensor b, at::Tensor d) {
          return ms_attention_reference(a, b, d, c.windows, causal);
        }, cast(q).to(at::kDouble), cast(k).to(at::kDouble), cast(v).to(at::kDouble), cast(dout).to(at::kDouble));
        const auto got = run([&](at::Tensor a, at::Tensor b, at::Tensor d) {
          return ms_attention_cuda(a, b, d, c.windows, causal);
        }, cast(q).cuda(), cast(k).cuda(), cast(v).cuda(), cast(dout).cuda());
        ok = compare(got, ref, tol,
                     "T=" + std::to_string(c.T) + " HS=" + std::to_string(c.HS) + (causal ? " causal " : " bidir ") +
                         c10::toString(dtype)) && ok;
      }
    }
  }
  at::manual_seed(7);
  const auto q = at::randn({2, 4, 150, 64}, at::kDouble), k = at::randn({2, 4, 150, 64}, at::kDouble);
  const auto v = at::randn({2, 4, 150, 64}, at::kDouble), dout = at::randn({2, 4, 150, 64}, at::kDouble);
  const auto ref = run([](at::Tensor a, at::Tensor b, at::Tensor d) {
    return ms_attention_reference(a, b, d, {4, 16}, true, 0.2, 1234);
  }, q, k, v, dout);
  const auto got = run([](at::Tensor a, at::Tensor b, at::Tensor d) {
    return ms_attention_cuda(a, b, d, {4, 16}, true, 0.2, 1234);
  }, q.to(at::kFloat).cuda(), k.to(at::kFloat).cuda(), v.to(at::kFloat).cuda(), dout.to(at::kFloat).cuda());
  return compare(got, ref, 1e-4, "dropout 0.2 (same hash mask) float") && ok;
}

double time_ms(const std::function<at::Tensor(at::Tensor, at::Tensor, at::Tensor)>& f, const at::Tensor& q,
               const at::Tensor& k, const at::Tensor& v, int reps) {
  const auto once = [&] {
    auto qg = q.detach().requires_grad_(true), kg = k.detach().requires_grad_(true);
    auto vg = v.detach().requires_grad_(true);
    auto y = f(qg, kg, vg);
    y.backward(at::ones_like(y));
  };
  once();
  c10::cuda::device_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) once();
  c10::cuda::device_synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
}

void bench() {
  const std::vector<int64_t> windows = {8, 16, 32, 64};
  std::printf("\nfwd+bwd ms, B=1 NH=8 HS=64 causal bf16, windows 8,16,32,64\n%7s %12s %12s %12s\n", "T",
              "ms_fused", "composite", "sdpa");
  for (int64_t T : {1024, 4096, 16384, 65536}) {
    at::manual_seed(0);
    const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
    const auto q = at::randn({1, 8, T, 64}, opts), k = at::randn({1, 8, T, 64}, opts);
    const auto v = at::randn({1, 8, T, 64}, opts);
    const int reps = T >= 16384 ? 3 : 10;
    const double ms = time_ms([&](at::Tensor a, at::Tensor b, at::Tensor c) {
      return ms_attention_cuda(a, b, c, windows, true);
    }, q, k, v, reps);
    double comp = NAN, sdpa = NAN;
    if (T <= 16384) {  // [8, T, T] scores and their gradients: 16k is ~20 GB in bf16
      comp = time_ms([](at::Tensor a, at::Tensor b, at::Tensor c) {
        return xtrain::kernels::attention::dense_attention_composite(a, b, c, true, 0.0, false);
      }, q, k, v, reps);
    }
#if TORCH_VERSION_MAJOR >= 2
    sdpa = time_ms([](at::Tensor a, at::Tensor b, at::Tensor c) {
      return at::scaled_dot_product_attention(a, b, c, {}, 0.0, /*is_causal=*/true);
    }, q, k, v, reps);
#endif
    std::printf("%7ld %12.2f %12.2f %12.2f\n", T, ms, comp, sdpa);
    std::fflush(stdout);
  }
}

}  // namespace

int main() {
  if (!at::hasCUDA()) {
    std::printf("no CUDA device\n");
    return 2;
  }
  const bool ok = checks();
  bench();
  std::printf("\n%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
