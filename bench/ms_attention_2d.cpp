// Benchmark (not a test): forward + backward time of attention over an image's patch grid against
// the grid size (7x7 .. 56x56 patches, plus a class token): dense attention (our fused flash-style
// CPU kernel), 2-D multi-scale attention as our fused CPU kernel (ms2d_fused_cpu), and its dense
// masked reference (ms2d_reference, O(T²); skipped above --reference-max-grid). Each grid first
// checks the fused kernel against the reference (output and gradients, fp32, where the reference
// runs), then runs the kernels side by side in this one process. Times are process CPU time (all
// threads; ratios use it) and wall clock, medians of --repeats after one warm-up: on a shared
// machine the CPU time is the stable one.
//   bench_ms_attention_2d [--grids 7,14,28,56] [--batch 8] [--heads 4] [--hs 24] [--windows 2,4]
//                         [--threads 1] [--repeats 3] [--reference-max-grid 28] [--no-cls]
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "xtrain/kernels/attention/flash_cpu.h"
#include "xtrain/kernels/ms_attention/ms_attention_2d_cpu.h"
#include "xtrain/kernels/ms_attention/reference_2d.h"

namespace {

using namespace xtrain::kernels;

std::vector<int64_t> ints(const char* s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Timing {
  double cpu_ms = NAN, wall_ms = NAN;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Timing time_it(int repeats, const std::function<void()>& f) {
  f();  // warm-up
  std::vector<double> cpu, wall;
  for (int i = 0; i < repeats; ++i) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    wall.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(1e3 * (cpu_seconds() - c0));
  }
  return {median(cpu), median(wall)};
}

using Fn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>;

// Forward, then backward of sum(out * dout).
void fwd_bwd(const Fn& f, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout) {
  auto qg = q.detach().requires_grad_(true), kg = k.detach().requires_grad_(true), vg = v.detach().requires_grad_(true);
  f(qg, kg, vg).backward(dout);
}

// Largest |a - b| / max(1, max|b|) over out and the three gradients.
double max_rel_error(const Fn& a, const Fn& b, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& dout) {
  auto run = [&](const Fn& f) {
    auto qg = q.detach().clone().requires_grad_(true), kg = k.detach().clone().requires_grad_(true);
    auto vg = v.detach().clone().requires_grad_(true);
    auto out = f(qg, kg, vg);
    out.backward(dout);
    return std::vector<at::Tensor>{out.detach(), qg.grad(), kg.grad(), vg.grad()};
  };
  const auto x = run(a), y = run(b);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double scale = std::max(1.0, y[i].abs().max().item<double>());
    worst = std::max(worst, x[i].sub(y[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

struct Args {
  std::vector<int64_t> grids = {7, 14, 28, 56}, windows = {2, 4};
  int64_t B = 8, NH = 4, HS = 24, ref_max = 28;
  int threads = 1, repeats = 3;
  bool cls = true;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (k == "--no-cls") {
      a.cls = false;
      continue;
    }
    ++i;
    if (k == "--grids") a.grids = ints(v);
    else if (k == "--windows") a.windows = ints(v);
    else if (k == "--batch") a.B = std::stoll(v);
    else if (k == "--heads") a.NH = std::stoll(v);
    else if (k == "--hs") a.HS = std::stoll(v);
    else if (k == "--threads") a.threads = std::stoi(v);
    else if (k == "--repeats") a.repeats = std::stoi(v);
    else if (k == "--reference-max-grid") a.ref_max = std::stoll(v);
    else {
      std::fprintf(stderr, "unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  at::set_num_threads(a.threads);
  std::string wl;
  for (size_t i = 0; i < a.windows.size(); ++i) wl += (i ? "," : "") + std::to_string(a.windows[i]);
  std::printf("# attention over a patch grid, forward+backward, fp32, B=%lld NH=%lld HS=%lld windows=[%s] %s, "
              "threads=%d, median of %d; ms = process CPU time (wall in parentheses)\n",
              static_cast<long long>(a.B), static_cast<long long>(a.NH), static_cast<long long>(a.HS), wl.c_str(),
              a.cls ? "class token" : "no class token", a.threads, a.repeats);
  std::printf("%-7s %6s %16s %16s %16s %9s %9s %10s\n", "grid", "T", "dense_flash ms", "ms2d_fused ms",
              "ms2d_ref ms", "dense/ms2d", "ref/ms2d", "check");
  for (const int64_t g : a.grids) {
    const int64_t T = g * g + (a.cls ? 1 : 0);
    at::manual_seed(0);
    const auto q = at::randn({a.B, a.NH, T, a.HS}), k = at::randn({a.B, a.NH, T, a.HS});
    const auto v = at::randn({a.B, a.NH, T, a.HS}), dout = at::randn({a.B, a.NH, T, a.HS});
    const Fn dense = [](const at::Tensor& x, const at::Tensor& y, const at::Tensor& z) {
      return attention::flash_attention_cpu(x, y, z, /*causal=*/false, 0.0);
    };
    const Fn fused = [&](const at::Tensor& x, const at::Tensor& y, const at::Tensor& z) {
      return ms_attention::ms_attention_2d_cpu(x, y, z, a.windows, g, g, a.cls);
    };
    const Fn reference = [&](const at::Tensor& x, const at::Tensor& y, const at::Tensor& z) {
      return ms_attention::ms_attention_2d_reference(x, y, z, a.windows, g, g, a.cls);
    };
    const bool with_ref = g <= a.ref_max;
    std::string check = "-";
    if (with_ref) {
      const double err = max_rel_error(fused, reference, q, k, v, dout);
      check = err < 1e-4 ? "ok" : "FAIL";
      if (err >= 1e-4) std::fprintf(stderr, "grid %lld: fused vs reference error %.3g\n", static_cast<long long>(g), err);
    }
    const Timing td = time_it(a.repeats, [&] { fwd_bwd(dense, q, k, v, dout); });
    const Timing tf = time_it(a.repeats, [&] { fwd_bwd(fused, q, k, v, dout); });
    Timing tr;
    if (with_ref) tr = time_it(a.repeats, [&] { fwd_bwd(reference, q, k, v, dout); });
    char ref_cell[40] = "-", ref_ratio[16] = "-";
    if (with_ref) {
      std::snprintf(ref_cell, sizeof ref_cell, "%.1f (%.1f)", tr.cpu_ms, tr.wall_ms);
      std::snprintf(ref_ratio, sizeof ref_ratio, "%.2fx", tr.cpu_ms / tf.cpu_ms);
    }
    char dcell[40], fcell[40];
    std::snprintf(dcell, sizeof dcell, "%.1f (%.1f)", td.cpu_ms, td.wall_ms);
    std::snprintf(fcell, sizeof fcell, "%.1f (%.1f)", tf.cpu_ms, tf.wall_ms);
    std::printf("%-7s %6lld %16s %16s %16s %8.2fx %9s %10s\n", (std::to_string(g) + "x" + std::to_string(g)).c_str(),
                static_cast<long long>(T), dcell, fcell, ref_cell, td.cpu_ms / tf.cpu_ms, ref_ratio, check.c_str());
    std::fflush(stdout);
  }
  return 0;
}
