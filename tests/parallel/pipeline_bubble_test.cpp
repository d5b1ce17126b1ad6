// Measured pipeline bubble (idle / total time per stage) against (p-1)/(m+p-1). Not a test: it runs
// only with XTRAIN_PIPELINE_BUBBLE=1 (no timing assertions in tests) and prints a table that
// bench/RESULTS_pipeline.md records. Each stage's forward sleeps 4 ms and its backward 8 ms (a
// gradient hook), so the figure measures the schedule and the executor's messaging, not CPU
// contention between ranks on a small machine.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/pipeline/pipeline_executor.h"

namespace xtrain::parallel::pipeline {
namespace {

constexpr int kForwardMs = 4, kBackwardMs = 8;

// The stage: y = x * w, then a 4 ms sleep; a hook on y sleeps 8 ms when its gradient arrives.
at::Tensor sleepy_stage(const at::Tensor& x, const at::Tensor& w) {
  auto y = x * w;
  std::this_thread::sleep_for(std::chrono::milliseconds(kForwardMs));
  y.register_hook([](const at::Tensor& g) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kBackwardMs));
    return g;
  });
  return y;
}

bool enabled() { return testing::worker_env("XTRAIN_PIPELINE_BUBBLE") == "1"; }

TEST(PipelineBubbleWorker, Measure) {
  XTRAIN_WORKER_ONLY();
  if (!enabled()) GTEST_SKIP();
  comm::CommOptions o;
  o.timeout_seconds = 60;
  auto c = comm::Communicator::create(comm::rank_info_from_env(), o);
  const int p = c->size(), s = c->rank();
  auto w = at::ones({4, 8}).requires_grad_();
  PipelineExecutor exec([&](const at::Tensor& x) { return sleepy_stage(x, w); }, c,
                        [](const at::Tensor& y, const at::Tensor&) { return y.sum(); });
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    for (int m : {2, 4, 8}) {
      const std::vector<at::Tensor> xs(m, at::ones({4, 8})), ys(m, at::zeros({4, 8}));
      double idle = 0;
      for (int rep = 0; rep < 4; ++rep) {  // first run is warm-up
        c->barrier();
        exec.run(make_schedule(kind, p, m, s), xs, ys);
        if (rep > 0) idle += (1 - exec.stats().busy_s / exec.stats().total_s) / 3;
      }
      std::printf("BUBBLE %s p=%d m=%d stage=%d measured=%.3f theory=%.3f in_flight=%d\n",
                  kind == ScheduleKind::kGPipe ? "gpipe" : "1f1b", p, m, s, idle,
                  double(p - 1) / (m + p - 1), exec.stats().max_in_flight);
    }
  }
  c->barrier();
}

TEST(PipelineBubble, Report) {
  if (!enabled()) GTEST_SKIP() << "set XTRAIN_PIPELINE_BUBBLE=1 to measure";
  for (int p : {2, 4}) {
    testing::WorkerOptions o;
    o.world_size = p;
    o.timeout_s = 120;
    o.env["XTRAIN_PIPELINE_BUBBLE"] = "1";
    const auto results = testing::run_workers("PipelineBubbleWorker.Measure", o);
    testing::expect_workers_ok(results);
    for (const auto& r : results) {
      size_t pos = 0;
      while ((pos = r.output.find("BUBBLE ", pos)) != std::string::npos) {
        const size_t end = r.output.find('\n', pos);
        std::printf("%s\n", r.output.substr(pos, end - pos).c_str());
        pos = end;
      }
    }
  }
}

}  // namespace
}  // namespace xtrain::parallel::pipeline
