// Benchmark (not a test): xtrain's fused AdamW step on fp32 flat buffers (10M, 100M params; 2 and 1
// threads) against the bandwidth bound: 28 B/param (read p, g, m, v; write p, m, v) at the best
// streaming rate measured on same-size buffers: at::copy_, memcpy (read + write; their stores also
// pay a write-allocate read that AdamW's in-place stores do not) and in-place a += b (AdamW's access
// pattern). Checks the step against ATen ops first; prints one `xtrain ...` line per (size, threads)
// for bench/fused_adamw.sh, which pairs them with the PyTorch peer.
#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "optim_bench.h"
#include "xtrain/optim/cpu/kernels.h"
#include "xtrain/optim/optimizer.h"

namespace {

using xtrain::bench::adamw_options;
using xtrain::bench::median_ms;
using xtrain::bench::parse_list;
using xtrain::optim::StepInputs;

// Three steps on 4099 elements, against torch.optim.AdamW's single-tensor formula in ATen ops.
bool matches_aten() {
  const int64_t n = 4099;
  const double lr = 1e-3, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  auto p = at::randn({n}), g = at::randn({n});
  auto ref = p.clone(), m = at::zeros({n}), v = at::zeros({n});
  auto opt = xtrain::optim::make_optimizer(adamw_options());
  opt->init_state(n);
  for (int t = 1; t <= 3; ++t) {
    StepInputs in;
    in.params = p;
    in.grads = g;
    opt->step(in);
    ref.mul_(1 - lr * wd);
    m.mul_(b1).add_(g, 1 - b1);
    v.mul_(b2).addcmul_(g, g, 1 - b2);
    const auto denom = (v.sqrt() / std::sqrt(1 - std::pow(b2, t))).add_(eps);
    ref.addcdiv_(m, denom, -(lr / (1 - std::pow(b1, t))));
  }
  const double diff = (p - ref).abs().max().item<double>();
  std::printf("check: fused AdamW vs ATen ops after 3 steps: max |diff| = %g%s\n", diff,
              at::equal(p, ref) ? " (bit-identical)" : "");
  return diff <= 1e-6;
}

void bench_size(int64_t n, const std::vector<int64_t>& thread_counts, int reps) {
  auto params = at::randn({n}) * 0.02;
  auto grads = at::randn({n});
  auto scratch = at::empty({n});
  scratch.zero_();  // fault the pages in before timing
  auto opt = xtrain::optim::make_optimizer(adamw_options());
  opt->init_state(n);
  StepInputs in;
  in.params = params;
  in.grads = grads;
  for (int64_t threads : thread_counts) {
    at::set_num_threads(static_cast<int>(threads));
    const double step_ms = median_ms([&] { opt->step(in); }, 2, reps);
    const double copy_ms = median_ms([&] { scratch.copy_(grads); }, 2, reps);
    const double memcpy_ms = median_ms(
        [&] { std::memcpy(scratch.data_ptr<float>(), params.data_ptr<float>(), n * sizeof(float)); }, 1, reps);
    const double add_ms = median_ms([&] { scratch.add_(grads); }, 2, reps);
    const double n4 = 4.0 * static_cast<double>(n);  // bytes per fp32 buffer
    const double copy_gbps = 2 * n4 / copy_ms / 1e6, memcpy_gbps = 2 * n4 / memcpy_ms / 1e6;
    const double add_gbps = 3 * n4 / add_ms / 1e6;
    const double bound_gbps = std::max({copy_gbps, memcpy_gbps, add_gbps});
    const double bytes = 28.0 * static_cast<double>(n);
    const double bound_ms = bytes / bound_gbps / 1e6;
    std::printf("xtrain n=%lld threads=%lld isa=%s adamw_ms=%.3f adamw_gbps=%.2f copy_gbps=%.2f memcpy1_gbps=%.2f "
                "inplace_add_gbps=%.2f bound_ms=%.3f vs_bound=%.2f\n",
                static_cast<long long>(n), static_cast<long long>(threads),
                xtrain::optim::cpu::isa_name(xtrain::optim::cpu::active_isa()), step_ms, bytes / step_ms / 1e6,
                copy_gbps, memcpy_gbps, add_gbps, bound_ms, step_ms / bound_ms);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {10000000, 100000000}, threads = {2, 1};
  int reps = 11;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sizes") sizes = parse_list(argv[i + 1]);
    else if (flag == "--threads") threads = parse_list(argv[i + 1]);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else if (flag == "--isa") {
      const std::string isa = argv[i + 1];
      using xtrain::optim::cpu::Isa;
      xtrain::optim::cpu::force_isa(isa == "scalar" ? Isa::kScalar : isa == "avx2" ? Isa::kAvx2 : Isa::kAvx512);
    } else {
      std::fprintf(stderr, "usage: %s [--sizes N,N] [--threads T,T] [--reps R] [--isa scalar|avx2|avx512]\n", argv[0]);
      return 2;
    }
  }
  if (!matches_aten()) {
    std::fprintf(stderr, "fused AdamW disagrees with the ATen reference: not timing it\n");
    return 1;
  }
  for (int64_t n : sizes) bench_size(n, threads, reps);
  return 0;
}
