// Benchmark (not a test): the optimizer step with 8-bit state (optimizer.params.state_dtype "int8")
// against our fused fp32 AdamW on the same flat buffers: median step time and optimizer-state bytes
// per parameter, per size and thread count. One `adam8bit ...` line each, for bench/adam8bit.sh.
//   build/bench/bench_adam8bit_step [--sizes 10000000,50000000] [--threads 2,1] [--reps 9]
#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "optim_bench.h"
#include "xtrain/optim/optimizer.h"

namespace {

using xtrain::bench::median_ms;
using xtrain::bench::parse_list;

struct Measured {
  double ms = 0, bytes_per_param = 0;
};

Measured measure(const std::string& state_dtype, int64_t n, int reps) {
  auto opt = xtrain::optim::make_optimizer(xtrain::bench::adamw_options(state_dtype));
  opt->init_state(n);
  xtrain::optim::StepInputs in;
  in.params = at::randn({n});
  in.grads = at::randn({n}).mul_(1e-2);
  Measured m;
  m.ms = median_ms([&] { opt->step(in); }, 2, reps);
  int64_t bytes = 0;
  for (const auto& [name, t] : opt->state()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  m.bytes_per_param = static_cast<double>(bytes) / static_cast<double>(n);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes{10000000, 50000000}, threads{2, 1};
  int reps = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sizes")) sizes = parse_list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = parse_list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  for (int64_t n : sizes) {
    for (int64_t t : threads) {
      at::set_num_threads(static_cast<int>(t));
      const auto fp32 = measure("fp32", n, reps), int8 = measure("int8", n, reps);
      std::printf(
          "adam8bit n=%lld threads=%lld fp32_ms=%.2f int8_ms=%.2f time_ratio=%.2f fp32_state_B_per_param=%.3f "
          "int8_state_B_per_param=%.4f state_ratio=%.4f\n",
          static_cast<long long>(n), static_cast<long long>(t), fp32.ms, int8.ms, int8.ms / fp32.ms,
          fp32.bytes_per_param, int8.bytes_per_param, int8.bytes_per_param / fp32.bytes_per_param);
    }
  }
  return 0;
}
