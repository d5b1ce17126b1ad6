#include "xtrain/monitor/flops.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <cmath>
#include <cstdio>

namespace xtrain::monitor {

double transformer_training_flops_per_token(double matmul_params, int64_t layers, int64_t seq_len, int64_t d_model) {
  return 6.0 * matmul_params + 12.0 * static_cast<double>(layers) * seq_len * d_model;
}

double gpt_training_flops_per_token(int64_t layers, int64_t d_model, int64_t seq_len, int64_t vocab) {
  const double C = static_cast<double>(d_model);
  const double n = static_cast<double>(layers) * 12.0 * C * C + static_cast<double>(vocab) * C;
  return transformer_training_flops_per_token(n, layers, seq_len, d_model);
}

namespace {

double time_matmul(c10::ScalarType dtype, c10::Device device, int64_t n, const GemmFn& gemm) {
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  // Constant inputs: GEMM time does not depend on the values, and random ones would draw from the
  // global generator and shift every later random number (dropout) of the run.
  const at::Tensor a = at::full({n, n}, 0.5, options), b = at::full({n, n}, 0.25, options);
  at::Tensor c = at::empty({n, n}, options);
  const GemmFn run = gemm ? gemm : GemmFn([](const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
    auto out = c;
    at::matmul_out(out, a, b);
  });
  run(c, a, b);  // warm-up: thread pools, oneDNN primitive cache, CUDA context
  (void)c.sum().item<double>();     // a device-agnostic synchronisation
  const int reps = device.is_cuda() ? 20 : 3;
  const auto start = std::chrono::steady_clock::now();
  // Into the same output: a fresh one per call would add page faults, not arithmetic, to the time.
  for (int i = 0; i < reps; ++i) run(c, a, b);
  (void)c.sum().item<double>();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * static_cast<double>(n) * n * n * reps / s;
}

}  // namespace

PeakFlops measure_peak_flops(c10::Device device, int64_t n, const GemmFn& gemm, const std::string& gemm_name) {
  PeakFlops p;
  p.n = n > 0 ? n : (device.is_cuda() ? 8192 : 1024);
  p.gemm = gemm ? gemm_name : "at::matmul";
  p.fp32 = time_matmul(at::kFloat, device, p.n, gemm);
  try {
    p.bf16 = time_matmul(at::kBFloat16, device, p.n, gemm);
  } catch (const c10::Error&) {
    p.bf16 = 0;  // no bf16 GEMM on this device/build
  }
  return p;
}

std::string PeakFlops::describe() const {
  return "fp32 " + si(fp32) + "FLOP/s, bf16 " + (bf16 > 0 ? si(bf16) + "FLOP/s" : std::string("n/a")) +
         " (" + gemm + " " + std::to_string(n) + "^3)";
}

double mfu(double model_flops_per_step, double step_seconds, double peak) {
  if (peak <= 0 || step_seconds <= 0) return 0;
  return model_flops_per_step / step_seconds / peak;
}

std::string si(double v) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  double a = std::abs(v);
  while (a >= 1000 && i < 6) a /= 1000, v /= 1000, ++i;
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.4g%s" : "%.2f%s", v, kPrefix[i]);
  return buf;
}

}  // namespace xtrain::monitor
