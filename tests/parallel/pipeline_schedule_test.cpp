// Pipeline schedules and partitioners as pure arithmetic: every stage's schedule run together in a
// simulator (sends buffered, receives block, as the executor does) must finish, with each receive
// matching its neighbour's send of the same micro-batch in order; forward precedes backward; the
// in-flight activations are min(p - s, m) for 1F1B and m for GPipe. Partitions against hand-computed
// DeepSpeed results.
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "xtrain/base/error.h"
#include "xtrain/parallel/pipeline/partition.h"
#include "xtrain/parallel/pipeline/schedule.h"

namespace xtrain::parallel::pipeline::pipeline_schedule_test {
namespace {

// Runs all stages' schedules; returns "" when every stage finished, else a description of where
// they are stuck or what mismatched.
std::string simulate(const std::vector<Schedule>& stages) {
  const int p = static_cast<int>(stages.size());
  std::map<std::pair<int, int>, std::deque<int>> channel;  // (src, dst) -> micro-batches in flight
  std::vector<size_t> pc(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (pc[s] < stages[s].size()) {
        const Action& a = stages[s][pc[s]];
        if (a.type == ActionType::kSendActivation) channel[{s, s + 1}].push_back(a.micro_batch);
        if (a.type == ActionType::kSendGrad) channel[{s, s - 1}].push_back(a.micro_batch);
        if (a.type == ActionType::kRecvActivation || a.type == ActionType::kRecvGrad) {
          const int src = a.type == ActionType::kRecvActivation ? s - 1 : s + 1;
          if (src < 0 || src >= p) return "stage " + std::to_string(s) + " receives from missing stage " + std::to_string(src);
          auto& q = channel[{src, s}];
          if (q.empty()) break;  // blocked
          if (q.front() != a.micro_batch)
            return "stage " + std::to_string(s) + " " + to_string(a) + " got micro-batch " + std::to_string(q.front());
          q.pop_front();
        }
        ++pc[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    if (pc[s] != stages[s].size()) return "deadlock: stage " + std::to_string(s) + " stuck at " + to_string(stages[s][pc[s]]);
  for (const auto& [key, q] : channel)
    if (!q.empty()) return "unreceived message " + std::to_string(key.first) + "->" + std::to_string(key.second);
  return "";
}

void check_schedule(ScheduleKind kind, int p, int m) {
  const std::string what = std::string(kind == ScheduleKind::kGPipe ? "gpipe" : "1f1b") + " p=" + std::to_string(p) +
                           " m=" + std::to_string(m);
  std::vector<Schedule> all;
  for (int s = 0; s < p; ++s) {
    all.push_back(make_schedule(kind, p, m, s));
    const Schedule& sched = all.back();
    std::vector<int> fwd(m, -1), bwd(m, -1);
    for (size_t k = 0; k < sched.size(); ++k) {
      const Action& a = sched[k];
      if (a.type == ActionType::kForward) { EXPECT_EQ(fwd[a.micro_batch], -1) << what; fwd[a.micro_batch] = static_cast<int>(k); }
      if (a.type == ActionType::kBackward) { EXPECT_EQ(bwd[a.micro_batch], -1) << what; bwd[a.micro_batch] = static_cast<int>(k); }
    }
    for (int i = 0; i < m; ++i) {
      EXPECT_GE(fwd[i], 0) << what << " stage " << s << " never forwards " << i;
      EXPECT_GT(bwd[i], fwd[i]) << what << " stage " << s << " micro-batch " << i;
    }
    ASSERT_GE(sched.size(), 2u);
    EXPECT_EQ(sched[sched.size() - 2].type, ActionType::kReduceGrads) << what;
    EXPECT_EQ(sched.back().type, ActionType::kOptimizerStep) << what;
    const int want = kind == ScheduleKind::kGPipe ? m : std::min(p - s, m);
    EXPECT_EQ(max_in_flight(sched), want) << what << " stage " << s;
  }
  EXPECT_EQ(simulate(all), "") << what;
}

TEST(PipelineSchedule, AllStagesTogetherFinishWithMatchingMessages) {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 3, 4, 8, 9}) check_schedule(kind, p, m);
}

TEST(PipelineSchedule, OneFOneBHandWritten) {
  // p=4, s=1, m=4: 2 warm-up forwards, 2 steady pairs, 2 cool-down backwards.
  std::string got;
  for (const auto& a : one_f_one_b_schedule(4, 4, 1)) got += to_string(a) + " ";
  EXPECT_EQ(got,
            "RA0 F0 SA0 RA1 F1 SA1 RA2 F2 SA2 RG0 B0 SG0 RA3 F3 SA3 RG1 B1 SG1 RG2 B2 SG2 RG3 B3 SG3 REDUCE STEP ");
  got.clear();
  for (const auto& a : gpipe_schedule(2, 2, 1)) got += to_string(a) + " ";
  EXPECT_EQ(got, "RA0 F0 RA1 F1 B0 SG0 B1 SG1 REDUCE STEP ");
}

TEST(PipelineSchedule, SimulatorCatchesABrokenSchedule) {
  // Stage 1 asks for micro-batch 1 first: a mismatch the simulator must report.
  auto a = gpipe_schedule(2, 2, 0), b = gpipe_schedule(2, 2, 1);
  std::swap(b[0], b[2]);
  EXPECT_NE(simulate({a, b}), "");
  // Both stages waiting for each other's gradient: a deadlock.
  Schedule c{{ActionType::kRecvGrad, 0}, {ActionType::kSendActivation, 0}};
  Schedule d{{ActionType::kRecvActivation, 0}, {ActionType::kRecvActivation, 1}, {ActionType::kSendGrad, 0}};
  EXPECT_NE(simulate({c, d}), "");
}

TEST(PipelineSchedule, RejectsBadArguments) {
  EXPECT_THROW(gpipe_schedule(2, 0, 0), UsageError);
  EXPECT_THROW(one_f_one_b_schedule(2, 2, 2), UsageError);
  EXPECT_THROW(schedule_kind_from_name("interleaved"), UsageError);
  EXPECT_EQ(schedule_kind_from_name("1f1b"), ScheduleKind::kOneFOneB);
}

TEST(PipelinePartition, UniformAsDeepSpeed) {
  EXPECT_EQ(partition_uniform(8, 4), (std::vector<int>{0, 2, 4, 6, 8}));
  EXPECT_EQ(partition_uniform(10, 4), (std::vector<int>{0, 3, 6, 8, 10}));  // residual 2 to the first stages
  EXPECT_EQ(partition_uniform(3, 4), (std::vector<int>{0, 1, 2, 3, 3}));
  EXPECT_EQ(partition_layers({5, 5, 5}, 1, "uniform"), (std::vector<int>{0, 3}));
}

TEST(PipelinePartition, ByParameters) {
  // An embedding (100) then six layers of 10 and a head (40), 3 stages: total 200; the best
  // bottleneck is 100 (the embedding alone), then 60 and 40.
  EXPECT_EQ(partition_layers({100, 10, 10, 10, 10, 10, 10, 40}, 3, "parameters"), (std::vector<int>{0, 1, 7, 8}));
  // [1,1,1,1,4] in 2: bottleneck 4 -> [0,4) and [4,5).
  EXPECT_EQ(partition_balanced({1, 1, 1, 1, 4}, 2), (std::vector<int>{0, 4, 5}));
  // Equal weights split evenly.
  EXPECT_EQ(partition_balanced({3, 3, 3, 3}, 2), (std::vector<int>{0, 2, 4}));
  // One heavy layer leaves room: every stage still gets a layer (bottleneck 9 either way).
  EXPECT_EQ(partition_balanced({9, 1, 1}, 3), (std::vector<int>{0, 1, 2, 3}));
  // Parameter-free layers (GELU: 0) ride with their neighbours: Linear 72 + GELU 0, four times, in 2.
  EXPECT_EQ(partition_balanced({72, 0, 72, 0, 72, 0, 72, 0}, 2), (std::vector<int>{0, 4, 8}));
  EXPECT_THROW(partition_layers({1, 2}, 2, "type:Linear"), UsageError);
  EXPECT_THROW(partition_balanced({1, -2}, 2), UsageError);
}

}  // namespace
}  // namespace xtrain::parallel::pipeline::pipeline_schedule_test
