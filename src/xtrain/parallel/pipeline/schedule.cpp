// Schedule builders; see schedule.h.
#include "xtrain/parallel/pipeline/schedule.h"

#include <algorithm>

#include "xtrain/base/error.h"

namespace xtrain::parallel::pipeline {
namespace {

void check_args(int stages, int micro_batches, int stage) {
  XTRAIN_USAGE_CHECK(stages >= 1, "pipeline: stages must be >= 1, got ", stages);
  XTRAIN_USAGE_CHECK(micro_batches >= 1, "pipeline: micro_batches must be >= 1, got ", micro_batches,
                     " (gradient_accumulation_steps)");
  XTRAIN_USAGE_CHECK(stage >= 0 && stage < stages, "pipeline: stage must be in [0, ", stages, "), got ", stage);
}

struct Builder {
  int stages, stage;
  Schedule out;
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  void forward(int i) {
    if (!first()) out.push_back({ActionType::kRecvActivation, i});
    out.push_back({ActionType::kForward, i});
    if (!last()) out.push_back({ActionType::kSendActivation, i});
  }
  void backward(int i) {
    if (!last()) out.push_back({ActionType::kRecvGrad, i});
    out.push_back({ActionType::kBackward, i});
    if (!first()) out.push_back({ActionType::kSendGrad, i});
  }
  Schedule finish() {
    out.push_back({ActionType::kReduceGrads, -1});
    out.push_back({ActionType::kOptimizerStep, -1});
    return std::move(out);
  }
};

}  // namespace

Schedule gpipe_schedule(int stages, int micro_batches, int stage) {
  check_args(stages, micro_batches, stage);
  Builder b{stages, stage, {}};
  for (int i = 0; i < micro_batches; ++i) b.forward(i);
  for (int i = 0; i < micro_batches; ++i) b.backward(i);
  return b.finish();
}

Schedule one_f_one_b_schedule(int stages, int micro_batches, int stage) {
  check_args(stages, micro_batches, stage);
  Builder b{stages, stage, {}};
  const int warmup = std::min(stages - stage - 1, micro_batches);
  for (int i = 0; i < warmup; ++i) b.forward(i);
  for (int j = 0; j < micro_batches - warmup; ++j) {  // steady state: F(warmup + j), B(j)
    b.forward(warmup + j);
    b.backward(j);
  }
  for (int j = micro_batches - warmup; j < micro_batches; ++j) b.backward(j);  // cool-down
  return b.finish();
}

Schedule make_schedule(ScheduleKind kind, int stages, int micro_batches, int stage) {
  return kind == ScheduleKind::kGPipe ? gpipe_schedule(stages, micro_batches, stage)
                                      : one_f_one_b_schedule(stages, micro_batches, stage);
}

ScheduleKind schedule_kind_from_name(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::kOneFOneB;
  XTRAIN_USAGE_ERROR("pipeline: unknown schedule \"", name, "\" (expected \"gpipe\" or \"1f1b\")");
}

int max_in_flight(const Schedule& schedule) {
  int now = 0, most = 0;
  for (const auto& a : schedule) {
    if (a.type == ActionType::kForward) most = std::max(most, ++now);
    if (a.type == ActionType::kBackward) --now;
  }
  return most;
}

std::string to_string(const Action& a) {
  const std::string i = std::to_string(a.micro_batch);
  switch (a.type) {
    case ActionType::kRecvActivation: return "RA" + i;
    case ActionType::kForward: return "F" + i;
    case ActionType::kSendActivation: return "SA" + i;
    case ActionType::kRecvGrad: return "RG" + i;
    case ActionType::kBackward: return "B" + i;
    case ActionType::kSendGrad: return "SG" + i;
    case ActionType::kReduceGrads: return "REDUCE";
    case ActionType::kOptimizerStep: return "STEP";
  }
  return "?";
}

}  // namespace xtrain::parallel::pipeline
