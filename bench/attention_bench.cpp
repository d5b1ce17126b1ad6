// Benchmark (not a test): forward + backward time and peak memory of attention at B = 1, NH = 8,
// HS = 64, T = 512 .. 16k: multi-scale attention (our fused CPU kernel) against dense causal
// attention, both our fused flash-style CPU kernel and the plain LibTorch composite (matmul, mask,
// softmax, matmul). Each kernel is first checked against its reference; then every size runs side
// by side in this one process. Peak memory counts the bytes ATen's CPU allocator hands out during
// forward + backward beyond the inputs (a counting allocator wraps it); each kernel's per-thread
// scratch (a few hundred KB) is not included. Prints a table with the ratios, the log-log slopes of
// time and memory against T, and writes the log-log plot (--png).
// Times are process CPU time (all threads; ratios use it) and wall clock: on a shared machine the
// CPU time is the stable one.
//   bench_attention_bench [--sizes 512,1024,...] [--threads 1] [--windows 8,16,32,64]
//                         [--composite-max-gb 6] [--png docs/attention_scaling.png] [--only multiscale]
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "xtrain/kernels/attention/dense_reference.h"
#include "xtrain/kernels/attention/flash_cpu.h"
#include "xtrain/kernels/ms_attention/ms_attention_cpu.h"
#include "xtrain/kernels/ms_attention/reference.h"
#include "xtrain/monitor/plot/plot.h"

namespace {

// Wraps ATen's CPU allocator and keeps the bytes in use and their peak.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t bytes) const override {
    auto inner = base_->allocate(bytes);
    void* data = inner.get();
    auto* ctx = new Ctx{std::move(inner), bytes, this};
    const int64_t now = in_use_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, ctx, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  int64_t in_use() const { return in_use_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(in_use_.load()); }

 private:
  struct Ctx {
    c10::DataPtr inner;
    size_t bytes;
    const CountingAllocator* owner;
  };
  static void release(void* p) {
    auto* ctx = static_cast<Ctx*>(p);
    ctx->owner->in_use_.fetch_sub(static_cast<int64_t>(ctx->bytes));
    delete ctx;
  }
  c10::Allocator* base_;
  mutable std::atomic<int64_t> in_use_{0}, peak_{0};
};

CountingAllocator* counter = nullptr;

using Attention = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>;

struct Impl {
  std::string name;
  Attention run;
};

struct Result {
  double ms = NAN;       // process CPU time (all threads), median
  double wall_ms = NAN;  // wall clock, median
  double peak_mb = NAN;
  std::string note;
};

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Run {
  double wall = 0, cpu = 0;
  int64_t peak_bytes = 0;
};

// One forward + backward from fresh leaf copies: times and the peak bytes above the inputs.
Run fwd_bwd(const Attention& f, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout) {
  auto qg = q.detach().requires_grad_(true), kg = k.detach().requires_grad_(true), vg = v.detach().requires_grad_(true);
  counter->reset_peak();
  const int64_t base = counter->in_use();
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  f(qg, kg, vg).backward(dout);
  Run r;
  r.cpu = cpu_seconds() - c0;
  r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_bytes = counter->peak() - base;
  return r;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

Result measure(const Impl& impl, int64_t T, int64_t NH, int64_t HS, int max_reps) {
  at::manual_seed(0);
  const auto q = at::randn({1, NH, T, HS}), k = at::randn({1, NH, T, HS}), v = at::randn({1, NH, T, HS});
  const auto dout = at::randn({1, NH, T, HS});
  const Run first = fwd_bwd(impl.run, q, k, v, dout);  // warm-up, and the peak (the same every run)
  std::vector<double> cpu, wall;
  const int reps = first.cpu > 3.0 ? 1 : max_reps;  // slow runs: one timed repetition
  for (int r = 0; r < reps; ++r) {
    const Run run = fwd_bwd(impl.run, q, k, v, dout);
    cpu.push_back(run.cpu);
    wall.push_back(run.wall);
  }
  Result out;
  out.ms = median(cpu) * 1e3;
  out.wall_ms = median(wall) * 1e3;
  out.peak_mb = static_cast<double>(first.peak_bytes) / (1024.0 * 1024.0);
  return out;
}

// Largest element-wise error of a kernel's output and input gradients against its reference,
// relative to the reference's largest magnitude.
double check(const Attention& kernel, const Attention& reference, int64_t T) {
  at::manual_seed(1);
  const auto q = at::randn({2, 8, T, 64}), k = at::randn({2, 8, T, 64}), v = at::randn({2, 8, T, 64});
  const auto dout = at::randn({2, 8, T, 64});
  double worst = 0;
  std::vector<at::Tensor> got, want;
  for (int which = 0; which < 2; ++which) {
    const bool ref = which == 1;
    const auto leaf = [&](const at::Tensor& x) { return (ref ? x.to(at::kDouble) : x).detach().requires_grad_(true); };
    auto qg = leaf(q), kg = leaf(k), vg = leaf(v);
    auto y = (ref ? reference : kernel)(qg, kg, vg);
    y.backward(dout.to(y.scalar_type()));
    std::vector<at::Tensor> r = {y.detach(), qg.grad(), kg.grad(), vg.grad()};
    (ref ? want : got) = r;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(1.0, want[i].abs().max().item<double>());
    worst = std::max(worst, at::sub(got[i].to(at::kDouble), want[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

double slope(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> lx, ly;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(y[i]) && y[i] > 0) {
      lx.push_back(std::log(x[i]));
      ly.push_back(std::log(y[i]));
    }
  }
  if (lx.size() < 2) return NAN;
  double mx = 0, my = 0;
  for (size_t i = 0; i < lx.size(); ++i) mx += lx[i] / lx.size(), my += ly[i] / ly.size();
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < lx.size(); ++i) sxy += (lx[i] - mx) * (ly[i] - my), sxx += (lx[i] - mx) * (lx[i] - mx);
  return sxy / sxx;
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

struct Options {
  std::vector<int64_t> sizes = {512, 1024, 2048, 4096, 8192, 16384}, windows = {8, 16, 32, 64};
  int threads = 1, reps = 3;
  double composite_max_gb = 6.0;
  std::string png, only;  // --only NAME: run one kernel (profiling)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--sizes") o.sizes = parse_list(argv[i + 1]);
    else if (a == "--windows") o.windows = parse_list(argv[i + 1]);
    else if (a == "--threads") o.threads = std::atoi(argv[i + 1]);
    else if (a == "--reps") o.reps = std::atoi(argv[i + 1]);
    else if (a == "--composite-max-gb") o.composite_max_gb = std::atof(argv[i + 1]);
    else if (a == "--png") o.png = argv[i + 1];
    else if (a == "--only") o.only = argv[i + 1];
  }
  return o;
}

constexpr int64_t kNH = 8, kHS = 64;

std::map<std::string, std::vector<Result>> run_all(const Options& o, const std::vector<Impl>& impls) {
  std::map<std::string, std::vector<Result>> results;
  for (int64_t T : o.sizes) {
    for (const auto& impl : impls) {
      Result r;
      const double est_gb = 5.0 * kNH * static_cast<double>(T) * T * 4 / 1e9;  // scores, softmax, their grads
      if (!o.only.empty() && impl.name != o.only) {
        r.note = "not run";
      } else if (impl.name == "composite" && est_gb > o.composite_max_gb) {
        r.note = "skipped: needs ~" + std::to_string(static_cast<int>(est_gb)) + " GB";
      } else {
        r = measure(impl, T, kNH, kHS, o.reps);
      }
      std::printf("xtrain impl=%s T=%ld cpu_ms=%.1f wall_ms=%.1f peak_mb=%.1f %s\n", impl.name.c_str(), T, r.ms,
                  r.wall_ms, r.peak_mb, r.note.c_str());
      std::fflush(stdout);
      results[impl.name].push_back(r);
    }
  }
  return results;
}

void report(const Options& o, const std::vector<Impl>& impls, std::map<std::string, std::vector<Result>>& results) {
  std::printf("\nfwd+bwd CPU time (ms, all threads) and peak memory (MB):\n");
  std::printf("%6s | %12s %12s %12s | %9s %9s %9s | %9s %9s\n", "T", "ms-attn ms", "flash ms", "composite ms",
              "ms-attn MB", "flash MB", "comp. MB", "vs flash", "vs comp.");
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    const auto &m = results["multiscale"][i], &f = results["flash"][i], &c = results["composite"][i];
    std::printf("%6ld | %12.1f %12.1f %12.1f | %9.1f %9.1f %9.1f | %8.1fx %8.1fx\n", o.sizes[i], m.ms, f.ms, c.ms,
                m.peak_mb, f.peak_mb, c.peak_mb, f.ms / m.ms, c.ms / m.ms);
  }
  const std::vector<double> xs(o.sizes.begin(), o.sizes.end());
  std::vector<xtrain::monitor::Series> series;
  std::printf("\nlog-log slopes against T (time | memory):");
  for (const auto& impl : impls) {
    std::vector<double> t, mem;
    for (const auto& r : results[impl.name]) {
      t.push_back(r.ms / 1e3);
      mem.push_back(r.peak_mb / 1024.0);
    }
    std::printf("  %s %.2f | %.2f;", impl.name.c_str(), slope(xs, t), slope(xs, mem));
    series.push_back({impl.name + " time (s)", xs, t});
    series.push_back({impl.name + " peak memory (GiB)", xs, mem});
  }
  std::printf("\n(n log n memory would fit a slope slightly above 1; n^2 a slope of 2)\n");
  if (o.png.empty()) return;
  xtrain::monitor::PlotOptions p;
  p.title = "attention fwd+bwd, NH=8 HS=64, causal fp32 CPU";
  p.x_label = "T (tokens)";
  p.y_label = "seconds (CPU time) / GiB";
  p.log_x = p.log_y = true;
  xtrain::monitor::write_line_plot_png(o.png, series, p);
  std::printf("wrote %s\n", o.png.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Freed memory stays in the process (as a caching allocator would keep it): otherwise every call
  // re-faults its buffers at ~12 µs per 4 KiB page (reference/platform.md) and that dominates.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  static CountingAllocator counting(c10::GetCPUAllocator());
  counter = &counting;
  c10::SetCPUAllocator(&counting, /*priority=*/100);
  at::set_num_threads(o.threads);
  using namespace xtrain::kernels::attention;
  using namespace xtrain::kernels::ms_attention;
  const auto& w = o.windows;
  const std::vector<Impl> impls = {
      {"multiscale", [&](auto& q, auto& k, auto& v) { return ms_attention_cpu(q, k, v, w, true); }},
      {"flash", [](auto& q, auto& k, auto& v) { return flash_attention_cpu(q, k, v, true); }},
      {"composite", [](auto& q, auto& k, auto& v) { return dense_attention_composite(q, k, v, true, 0.0, false); }}};
  const std::vector<Attention> references = {
      [&](auto& q, auto& k, auto& v) { return ms_attention_reference(q, k, v, w, true); },
      [](auto& q, auto& k, auto& v) { return dense_attention_reference(q, k, v, true); },
      [](auto& q, auto& k, auto& v) { return dense_attention_reference(q, k, v, true); }};
  std::printf("# attention fwd+bwd, B=1 NH=%ld HS=%ld causal fp32, %d threads, windows", kNH, kHS, o.threads);
  for (auto x : w) std::printf(" %ld", x);
  std::printf(" (heads split evenly), multiscale query block %ld\n", ms_block_size(8));
  for (size_t i = 0; i < impls.size(); ++i) {
    const double err = check(impls[i].run, references[i], 300);
    std::printf("check %-10s vs reference (T=300, fp64): max error %.2e of scale %s\n", impls[i].name.c_str(), err,
                err < 1e-4 ? "ok" : "FAILED");
    if (err >= 1e-4) return 1;
  }
  auto results = run_all(o, impls);
  report(o, impls, results);
  return 0;
}
