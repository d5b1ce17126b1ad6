// The GEMM peak that bench/cpu_train.sh quotes MFU against: the best of oneDNN's matmul (through
// kernels::gemm_out) and ATen's mm (OpenBLAS for fp32) over large square problems, per dtype and
// thread count, after checking both against float64. Prints one JSON line per (dtype, threads).
//   bench_gemm_peak [--threads 1,2] [--sizes 1024,2048]
#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "xtrain/base/memory_pool.h"
#include "xtrain/base/threads.h"
#include "xtrain/kernels/gemm.h"

namespace {

std::vector<int64_t> list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

// Best GFLOP/s of `reps` runs of C = A·B (n³) with `backend`, after one warm-up.
double gflops(xtrain::kernels::GemmBackend backend, const at::Tensor& a, const at::Tensor& b, int reps) {
  xtrain::kernels::set_gemm_backend(backend);
  auto c = at::empty({a.size(0), b.size(1)}, a.options());
  xtrain::kernels::gemm_out(c, a, b);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    xtrain::kernels::gemm_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * a.size(0) * a.size(1) * b.size(1) / best * 1e-9;
}

bool check(at::ScalarType dtype) {
  const auto a = at::randn({256, 256}).to(dtype), b = at::randn({256, 256}).to(dtype);
  const auto ref = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
  bool ok = true;
  for (auto backend : {xtrain::kernels::GemmBackend::kOneDnn, xtrain::kernels::GemmBackend::kAten}) {
    xtrain::kernels::set_gemm_backend(backend);
    const auto c = xtrain::kernels::gemm(a, b, {}, at::kFloat);
    ok = ok && (c.to(at::kDouble) - ref).abs().max().item<double>() < 1e-3;  // fp32 sums of 256 terms
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  xtrain::threads::ensure_loader_environment(argc, argv);
  xtrain::memory_pool::install({});
  std::vector<int64_t> threads = {1, 2}, sizes = {1024, 2048};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = list(argv[i + 1]);
    if (k == "--sizes") sizes = list(argv[i + 1]);
  }
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    std::fprintf(stderr, "check %s: %s\n", dtype == at::kFloat ? "fp32" : "bf16", check(dtype) ? "ok" : "FAIL");
    for (int64_t t : threads) {
      xtrain::threads::ThreadPolicy p;
      p.threads = static_cast<int>(t);
      xtrain::threads::apply(p);
      double onednn = 0, aten = 0;
      for (int64_t n : sizes) {
        const auto a = at::randn({n, n}).to(dtype), b = at::randn({n, n}).to(dtype);
        onednn = std::max(onednn, gflops(xtrain::kernels::GemmBackend::kOneDnn, a, b, 5));
        aten = std::max(aten, gflops(xtrain::kernels::GemmBackend::kAten, a, b, 3));
      }
      std::printf("{\"dtype\": \"%s\", \"threads\": %lld, \"onednn_gflops\": %.1f, \"aten_gflops\": %.1f, "
                  "\"peak_gflops\": %.1f}\n",
                  dtype == at::kFloat ? "fp32" : "bf16", static_cast<long long>(t), onednn, aten, std::max(onednn, aten));
      std::fflush(stdout);
    }
  }
  return 0;
}
