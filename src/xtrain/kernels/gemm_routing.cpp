// The GEMM routing table. bf16: oneDNN, by table (ATen's own bf16 matmul is oneDNN behind ideep's
// extra layer). fp32: one measurement per process, the first time an fp32 GEMM runs: both backends
// on 256³ at one thread (OpenMP and OpenBLAS both, so a busy machine's scheduler does not decide),
// best of 5; ATen (OpenBLAS) only when it is 25% faster. The decision is per dtype, not per shape:
// per-shape measurements flipped near ties from run to run (tiny GEMMs: 10 vs 11 GFLOP/s), and a
// different backend rounds differently, so two identical runs would not have been bit-identical.
// Inputs are deterministic (no RNG draws) and autocast is off while measuring.
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linspace.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>

#include "xtrain/kernels/gemm.h"
#include "xtrain/kernels/gemm_backends.h"

namespace xtrain::kernels {

namespace {

constexpr int64_t kProbe = 256;        // the measured problem: 256³ (34 MFLOP)
constexpr double kAtenMargin = 1.25;   // ATen must be this much faster to be chosen

struct Measured {
  GemmBackend choice = GemmBackend::kOneDnn;
  double onednn_gflops = 0, aten_gflops = 0;
  std::string impl;
};

GemmBackend parse_backend(const char* v) {
  const std::string s = v == nullptr ? "" : v;
  if (s.empty() || s == "auto") return GemmBackend::kAuto;
  if (s == "onednn") return GemmBackend::kOneDnn;
  if (s == "aten") return GemmBackend::kAten;
  TORCH_CHECK(false, "gemm: XTRAIN_GEMM must be auto, onednn or aten, got '", s, "'");
}

struct Table {
  std::mutex mu;
  std::optional<Measured> fp32;
  std::atomic<int> forced{static_cast<int>(parse_backend(std::getenv("XTRAIN_GEMM")))};
  std::atomic<bool> fp32_ready{false};
  std::atomic<int> fp32_choice{static_cast<int>(GemmBackend::kOneDnn)};
};

Table& table() {
  static Table* t = new Table();
  return *t;
}

// One thread for ATen/OpenMP and OpenBLAS for the scope (OpenBLAS's setter found with dlsym).
class SingleThread {
 public:
  SingleThread() : aten_(at::get_num_threads()) {
    set_blas_ = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    auto get_blas = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    blas_ = get_blas ? get_blas() : 0;
    at::set_num_threads(1);
    if (set_blas_) set_blas_(1);
  }
  ~SingleThread() {
    at::set_num_threads(aten_);
    if (set_blas_ && blas_ > 0) set_blas_(blas_);
  }

 private:
  int aten_, blas_ = 0;
  void (*set_blas_)(int) = nullptr;
};

// Best of `reps` timed runs after one warm-up (which also creates the oneDNN primitive).
double seconds(GemmBackend backend, const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, int reps) {
  detail::gemm_out_with(backend, c, a, b, {});
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    detail::gemm_out_with(backend, c, a, b, {});
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

Measured measure_fp32() {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  SingleThread one;
  const int64_t s = kProbe;
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  const auto a = at::linspace(-1, 1, s * s, opts).reshape({s, s});
  const auto b = at::linspace(1, -1, s * s, opts).reshape({s, s});
  auto c = at::empty({s, s}, opts);
  Measured m;
  detail::onednn_gemm_out(c, a, b, {}, &m.impl);
  const double flops = 2.0 * s * s * s;
  m.onednn_gflops = flops / seconds(GemmBackend::kOneDnn, c, a, b, 5) * 1e-9;
  m.aten_gflops = flops / seconds(GemmBackend::kAten, c, a, b, 5) * 1e-9;
  const bool aten = m.impl.empty() || m.aten_gflops > kAtenMargin * m.onednn_gflops;
  m.choice = aten ? GemmBackend::kAten : GemmBackend::kOneDnn;
  return m;
}

GemmBackend fp32_choice() {
  auto& t = table();
  if (t.fp32_ready.load(std::memory_order_acquire)) return static_cast<GemmBackend>(t.fp32_choice.load());
  std::lock_guard<std::mutex> lock(t.mu);  // held while measuring: concurrent first users wait once
  if (!t.fp32) {
    t.fp32 = measure_fp32();
    t.fp32_choice = static_cast<int>(t.fp32->choice);
    t.fp32_ready.store(true, std::memory_order_release);
  }
  return t.fp32->choice;
}

const char* name(GemmBackend b) {
  return b == GemmBackend::kOneDnn ? "onednn" : b == GemmBackend::kAten ? "aten" : "auto";
}

}  // namespace

GemmBackend gemm_backend_for(c10::ScalarType dtype, int64_t batch, int64_t M, int64_t N, int64_t K) {
  const auto forced = static_cast<GemmBackend>(table().forced.load());
  if (forced != GemmBackend::kAuto) return forced;
  return dtype == at::kFloat ? fp32_choice() : GemmBackend::kOneDnn;
}

void set_gemm_backend(GemmBackend backend) { table().forced = static_cast<int>(backend); }

GemmBackend forced_gemm_backend() { return static_cast<GemmBackend>(table().forced.load()); }

std::string gemm_routing_report(bool measure_now) {
  std::string out;
  const auto forced = forced_gemm_backend();
  if (forced != GemmBackend::kAuto) out += std::string("gemm: forced to ") + name(forced) + "\n";
  if (measure_now) fp32_choice();
  std::lock_guard<std::mutex> lock(table().mu);
  if (table().fp32) {
    const auto& m = *table().fp32;
    char line[200];
    std::snprintf(line, sizeof line, "gemm fp32: onednn %.0f GFLOP/s [%s], aten %.0f (256^3, 1 thread) -> %s\n",
                  m.onednn_gflops, m.impl.empty() ? "none" : m.impl.c_str(), m.aten_gflops, name(m.choice));
    out += line;
  } else {
    out += "gemm fp32: not measured yet (no fp32 GEMM has run)\n";
  }
  out += "gemm bf16: onednn (table: ATen's bf16 matmul is oneDNN too)\n";
  return out;
}

}  // namespace xtrain::kernels
