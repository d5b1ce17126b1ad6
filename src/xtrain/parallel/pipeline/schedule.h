// Pipeline schedules as data: for (stages p, micro-batches m, stage s) the ordered list of actions
// one stage runs. GPipe (Huang et al. 2019): all forwards, then all backwards. 1F1B (PipeDream-Flush,
// Narayanan et al. 2021; DeepSpeed's TrainSchedule): p-s-1 warm-up forwards, then one forward / one
// backward, then the remaining backwards, so at most min(p-s, m) activations are kept per stage.
// The choice: sends are asynchronous (only receives block), which is what the executor does.
#pragma once
#include <string>
#include <vector>

namespace xtrain::parallel::pipeline {

enum class ActionType { kRecvActivation, kForward, kSendActivation, kRecvGrad, kBackward, kSendGrad, kReduceGrads, kOptimizerStep };

struct Action {
  ActionType type;
  int micro_batch = -1;  // -1 for kReduceGrads / kOptimizerStep
  bool operator==(const Action& o) const { return type == o.type && micro_batch == o.micro_batch; }
};

using Schedule = std::vector<Action>;

enum class ScheduleKind { kGPipe, kOneFOneB };

Schedule gpipe_schedule(int stages, int micro_batches, int stage);
Schedule one_f_one_b_schedule(int stages, int micro_batches, int stage);
Schedule make_schedule(ScheduleKind kind, int stages, int micro_batches, int stage);
ScheduleKind schedule_kind_from_name(const std::string& name);  // "gpipe" | "1f1b"

// Largest number of micro-batches forwarded but not yet backwarded at any point of `schedule`.
int max_in_flight(const Schedule& schedule);
std::string to_string(const Action& action);  // "F3", "B0", "SA1", "RA1", "SG2", "RG2", "REDUCE", "STEP"

}  // namespace xtrain::parallel::pipeline
