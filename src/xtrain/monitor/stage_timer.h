// Wall-clock time per named stage of a training step (`wall_clock_breakdown`, DeepSpeed's timers):
// RAII scopes accumulate into the current step; end_step() returns `time/<stage>_ms`,
// `time/step_ms` and `time/other_ms` (step time not inside any scope) for the metrics, and
// summary() prints mean, p50, p90 and share of the step per stage at the end of the run.
// Design choice: time is exclusive — a scope opened inside another is subtracted from it — so the
// stages partition the step exactly: sum(stages) + other = step. Single-threaded (the training
// loop's thread). On a GPU, pass `synchronize` so each scope boundary waits for queued kernels.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace xtrain::monitor {

class StageTimer {
 public:
  using Clock = std::chrono::steady_clock;

  class Scope {
   public:
    Scope(StageTimer* timer, size_t stage);
    ~Scope();
    Scope(Scope&& other) noexcept : timer_(other.timer_) { other.timer_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;

   private:
    StageTimer* timer_;
  };

  explicit StageTimer(bool enabled = true, std::function<void()> synchronize = {});
  bool enabled() const { return enabled_; }

  // Starts an optimizer step (the first micro-batch's data loading should come after this).
  void begin_step();
  // Times the enclosing block as `stage` ("data", "forward", "backward", "communication",
  // "optimizer", …). A no-op when disabled or outside begin_step/end_step.
  Scope scope(const std::string& stage);
  // Ends the step: {"time/forward_ms": …, …, "time/step_ms": …, "time/other_ms": …}; empty when
  // disabled. Stages seen in earlier steps but not in this one report 0.
  std::map<std::string, double> end_step();

  int64_t steps() const { return static_cast<int64_t>(step_ms_.size()); }
  // The end-of-run table; the first step is left out when there are more than two (warm-up:
  // first-touch allocations and lazy initialisation would dominate its numbers).
  std::string summary() const;

 private:
  friend class Scope;
  struct Open {
    size_t stage;
    Clock::time_point start;
    double child_ms = 0;  // time spent in scopes nested inside this one
  };
  void close_scope();
  size_t stage_index(const std::string& name);

  bool enabled_;
  std::function<void()> synchronize_;
  bool in_step_ = false;
  Clock::time_point step_start_;
  std::vector<std::string> names_;           // first-seen order
  std::vector<double> current_ms_;           // per stage, this step
  std::vector<std::vector<double>> history_;  // per stage, per completed step
  std::vector<double> step_ms_;
  std::vector<Open> open_;
};

}  // namespace xtrain::monitor
