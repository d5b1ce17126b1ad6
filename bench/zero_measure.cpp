// Benchmark (not a test): ZeRO stages 0-2 on 2 ranks, model-state memory and step time. A 4-layer
// MLP (~2.4M parameters, bf16 parameters and gradient accumulation, AdamW, micro-batch 32) trains
// 12 steps per (stage, overlap_comm); each rank prints its model-state bytes as the strategy holds
// them next to the ZeRO paper's formula (16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N), its peak RSS (VmHWM) and
// the median step time after 2 warm-up steps. The check: model states within 1% of the formula
// (padding only), else it exits 1. OMP_NUM_THREADS=1 per rank.
// Run: build/bench/bench_zero_measure   (re-launches itself as 2 ranks per configuration; results in
// bench/RESULTS_zero.md, formerly tests/zero/zero_measure_test.cpp)
#include <ATen/Functions.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "launch_self.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/zero/memory_estimate.h"

namespace {

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

xtrain::zero::NamedParams mlp_parameters() {
  const std::vector<std::vector<int64_t>> shapes{{1024, 256}, {1024}, {1024, 1024}, {1024},
                                                 {1024, 1024}, {1024}, {16, 1024}, {16}};
  xtrain::zero::NamedParams params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.emplace_back("p" + std::to_string(i), (at::randn(shapes[i]) * 0.02).requires_grad_(true));
  }
  return params;
}

xtrain::config::Config measure_config(int world, int stage, int overlap) {
  xtrain::config::LoadOptions lo;
  lo.world_size = world;
  lo.quiet = true;
  auto cfg = xtrain::config::load_text(R"({"train_micro_batch_size_per_gpu": 32, "bf16": {"enabled": true},
      "data_types": {"grad_accum_dtype": "bf16"}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})",
                                       lo).config;
  cfg.zero_optimization.stage = stage;
  cfg.zero_optimization.reduce_bucket_size = 500000;
  cfg.zero_optimization.overlap_comm = overlap;
  return cfg;
}

int run_rank(int stage, int overlap) {
  xtrain::comm::CommOptions co;
  co.timeout_seconds = 120;
  auto c = xtrain::comm::Communicator::create(xtrain::comm::rank_info_from_env(), co);
  auto params = mlp_parameters();
  auto loss = [&params](const xtrain::data::Batch& b) {
    auto h = b.input;
    for (size_t i = 0; i + 1 < params.size(); i += 2) {
      h = at::linear(h, params[i].second, params[i + 1].second);
      if (i + 2 < params.size()) h = at::gelu(h);
    }
    return (h.to(at::kFloat) - b.target).pow(2).mean();
  };
  const auto cfg = measure_config(c->size(), stage, overlap);
  xtrain::Engine e(params, loss, cfg, c);
  std::vector<double> ms;
  for (int s = 0; s < 12; ++s) {
    xtrain::data::Batch b{at::randn({32, 256}), at::randn({32, 16})};
    const auto t0 = std::chrono::steady_clock::now();
    e.backward(e.forward(b));
    e.step();
    if (s >= 2) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const auto r = e.memory();
  const auto f = xtrain::zero::estimate_memory(stage, e.layout().used, c->size(), 2, 2);
  const bool ok = std::abs(double(r.total()) / double(f.total()) - 1) < 0.01;
  std::printf("check: stage %d rank %d model states within 1%% of the ZeRO formula: %s\n", stage, c->rank(),
              ok ? "ok" : "FAILED");
  std::printf("MEASURE stage %d overlap_comm %d rank %d psi %lld: model states %.2f MB (params %.2f grads %.2f "
              "master %.2f optim %.2f), ZeRO formula %.2f MB, peak RSS %.1f MB, median step %.1f ms\n",
              stage, overlap, c->rank(), static_cast<long long>(e.layout().used), r.total() / 1e6, r.param_bytes / 1e6,
              r.grad_bytes / 1e6, r.master_bytes / 1e6, r.optimizer_bytes / 1e6, f.total() / 1e6,
              peak_rss_bytes() / 1e6, ms[ms.size() / 2]);
  c->barrier();
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RANK")) return run_rank(std::atoi(argv[1]), std::atoi(argv[2]));
  ::setenv("OMP_NUM_THREADS", "1", 1);  // the ranks inherit it
  for (auto [stage, overlap] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {2, 0}, {2, 1}}) {
    const int rc = xtrain::bench::launch_self(2, {std::to_string(stage), std::to_string(overlap)});
    if (rc != 0) return rc;
  }
  return 0;
}
