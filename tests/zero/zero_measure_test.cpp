// Not a test: measured figures for the ZeRO report (bench/zero_results.md), disabled by default.
// 2 ranks train a 4-layer MLP (~2.4M parameters, bf16 parameters and gradient accumulation, AdamW)
// at one stage per spawn; each rank prints its model-state bytes next to the ZeRO formula, its peak
// RSS, and the median step time. Run:
//   build-zero/xtrain_tests --gtest_also_run_disabled_tests --gtest_filter='ZeroMeasure.*'
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/zero/memory_estimate.h"

namespace xtrain {
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

TEST(ZeroMeasureWorker, Run) {
  XTRAIN_WORKER_ONLY();
  comm::CommOptions co;
  co.timeout_seconds = 120;
  auto c = comm::Communicator::create(comm::rank_info_from_env(), co);
  const int stage = std::stoi(testing::worker_env("XTRAIN_ZERO_STAGE"));
  const std::vector<std::vector<int64_t>> shapes{{1024, 256}, {1024}, {1024, 1024}, {1024}, {1024, 1024}, {1024}, {16, 1024}, {16}};
  zero::NamedParams params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.emplace_back("p" + std::to_string(i), (at::randn(shapes[i]) * 0.02).requires_grad_(true));
  }
  auto loss = [&params](const data::Batch& b) {
    auto h = b.input;
    for (size_t i = 0; i + 1 < params.size(); i += 2) {
      h = at::linear(h, params[i].second, params[i + 1].second);
      if (i + 2 < params.size()) h = at::gelu(h);
    }
    return (h.to(at::kFloat) - b.target).pow(2).mean();
  };
  config::LoadOptions lo;
  lo.world_size = c->size();
  lo.quiet = true;
  auto cfg = config::load_text(R"({"train_micro_batch_size_per_gpu": 32, "bf16": {"enabled": true},
      "data_types": {"grad_accum_dtype": "bf16"}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})",
                               lo).config;
  cfg.zero_optimization.stage = stage;
  cfg.zero_optimization.reduce_bucket_size = 500000;
  cfg.zero_optimization.overlap_comm = std::stoi(testing::worker_env("XTRAIN_ZERO_OVERLAP", "-1"));
  Engine e(params, loss, cfg, c);
  std::vector<double> ms;
  for (int s = 0; s < 12; ++s) {
    data::Batch b{at::randn({32, 256}), at::randn({32, 16})};
    const auto t0 = std::chrono::steady_clock::now();
    e.backward(e.forward(b));
    e.step();
    if (s >= 2) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const auto r = e.memory();
  const auto f = zero::estimate_memory(stage, e.layout().used, c->size(), 2, 2);
  std::printf("MEASURE stage %d overlap_comm %d rank %d psi %lld: model states %.2f MB (params %.2f grads %.2f master %.2f optim %.2f),"
              " ZeRO formula %.2f MB, peak RSS %.1f MB, median step %.1f ms\n",
              stage, cfg.zero_optimization.overlap_comm, c->rank(), static_cast<long long>(e.layout().used), r.total() / 1e6, r.param_bytes / 1e6,
              r.grad_bytes / 1e6, r.master_bytes / 1e6, r.optimizer_bytes / 1e6, f.total() / 1e6,
              peak_rss_bytes() / 1e6, ms[ms.size() / 2]);
  c->barrier();
}

TEST(ZeroMeasure, DISABLED_MemoryAndStepTimeTwoRanks) {
  for (auto [stage, overlap] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {2, 0}, {2, 1}}) {
    testing::WorkerOptions o;
    o.world_size = 2;
    o.timeout_s = 300;
    o.env = {{"XTRAIN_ZERO_STAGE", std::to_string(stage)}, {"XTRAIN_ZERO_OVERLAP", std::to_string(overlap)},
             {"OMP_NUM_THREADS", "1"}};
    const auto results = testing::run_workers("ZeroMeasureWorker.Run", o);
    testing::expect_workers_ok(results);
    for (const auto& w : results) {
      const auto pos = w.output.find("MEASURE");
      if (pos != std::string::npos) std::printf("%s", w.output.substr(pos, w.output.find('\n', pos) - pos + 1).c_str());
    }
  }
}

}  // namespace
}  // namespace xtrain
