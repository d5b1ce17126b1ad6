// Benchmark (not a test): the measured pipeline bubble (idle / total time per stage) against
// GPipe's (p-1)/(m+p-1), for GPipe and 1F1B with p = 2 and 4 stages and m = 2, 4, 8 micro-batches.
// Each stage's forward sleeps 4 ms and its backward 8 ms (a gradient hook), so the figure measures
// the schedule and the executor's messaging, not CPU contention between ranks on a small machine.
// Idle is the mean of 3 runs after 1 warm-up. Every run is checked first: each stage's gradient must
// be the closed form (every micro-batch's forward and backward ran exactly once).
// Run: build/bench/bench_pipeline_bubble   (re-launches itself as 2, then 4 ranks; results in
// bench/RESULTS_pipeline.md, formerly tests/parallel/pipeline_bubble_test.cpp)
#include <ATen/Functions.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "launch_self.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/pipeline/pipeline_executor.h"

namespace {
namespace pp = xtrain::parallel::pipeline;

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

// The executor averages the loss over the m micro-batches, so the gradient of sum(x * w) with
// inputs of ones is m shares of 1/m = 1 per element on every stage: a dropped or repeated
// micro-batch shows here ((m-1)/m or (m+1)/m) before any timing is printed.
void check_gradient(const at::Tensor& w, int m, int stage) {
  if (!w.grad().defined() || !at::allclose(w.grad(), at::ones_like(w), /*rtol=*/0, /*atol=*/1e-6)) {
    std::fprintf(stderr, "check FAILED: stage %d gradient after m=%d micro-batches is not 1 everywhere\n", stage, m);
    std::exit(1);
  }
}

int run_rank() {
  xtrain::comm::CommOptions o;
  o.timeout_seconds = 60;
  auto c = xtrain::comm::Communicator::create(xtrain::comm::rank_info_from_env(), o);
  const int p = c->size(), s = c->rank();
  auto w = at::ones({4, 8}).requires_grad_();
  pp::PipelineExecutor exec([&](const at::Tensor& x) { return sleepy_stage(x, w); }, c,
                            [](const at::Tensor& y, const at::Tensor&) { return y.sum(); });
  for (auto kind : {pp::ScheduleKind::kGPipe, pp::ScheduleKind::kOneFOneB}) {
    for (int m : {2, 4, 8}) {
      const std::vector<at::Tensor> xs(m, at::ones({4, 8})), ys(m, at::zeros({4, 8}));
      double idle = 0;
      for (int rep = 0; rep < 4; ++rep) {  // the first run is the warm-up
        w.mutable_grad() = at::Tensor();
        c->barrier();
        exec.run(pp::make_schedule(kind, p, m, s), xs, ys);
        check_gradient(w, m, s);
        if (rep > 0) idle += (1 - exec.stats().busy_s / exec.stats().total_s) / 3;
      }
      std::printf("BUBBLE %s p=%d m=%d stage=%d measured=%.3f theory=%.3f in_flight=%d\n",
                  kind == pp::ScheduleKind::kGPipe ? "gpipe" : "1f1b", p, m, s, idle, double(p - 1) / (m + p - 1),
                  exec.stats().max_in_flight);
      std::fflush(stdout);
    }
  }
  std::printf("check: stage %d, every run's gradient equals the closed form (1 per element): ok\n", s);
  c->barrier();
  return 0;
}

}  // namespace

int main() {
  if (std::getenv("RANK")) return run_rank();
  for (int p : {2, 4}) {  // the parent: one group of p ranks per pipeline depth
    const int rc = xtrain::bench::launch_self(p, {"rank"});  // the launcher wants an argument
    if (rc != 0) return rc;
  }
  return 0;
}
