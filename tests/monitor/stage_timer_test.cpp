// Stage breakdown: the stages partition the step (sum of stages + other = step time), each stage
// matches the test's own stopwatch around the same block, nested scopes are exclusive, and the
// end-of-run table lists every stage.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "xtrain/base/stopwatch.h"
#include "xtrain/monitor/stage_timer.h"

namespace xtrain::monitor::stage_timer_test {
namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The scope's clock and the test's stopwatch are read a few instructions apart; only preemption
// between the two reads can separate them, so 2 ms is generous on a loaded 2-core machine.
constexpr double kClockSkewMs = 2.0;

TEST(StageTimer, StagesPartitionTheStep) {
  StageTimer timer;
  std::map<std::string, double> own;
  Stopwatch outer;
  timer.begin_step();
  auto timed = [&](const std::string& stage, int ms) {
    Stopwatch w;
    auto s = timer.scope(stage);
    sleep_ms(ms);
    own[stage] += w.millis();
  };
  timed("data", 3);
  timed("forward", 6);
  {
    Stopwatch w;
    auto s = timer.scope("backward");
    sleep_ms(4);
    timed("communication", 3);  // nested: counted as communication, not backward
    own["backward"] = w.millis() - own["communication"];
  }
  timed("optimizer", 2);
  sleep_ms(2);  // outside every scope: "other"
  const auto m = timer.end_step();
  const double outer_ms = outer.millis();

  double sum = 0;
  for (const char* stage : {"data", "forward", "backward", "communication", "optimizer"}) {
    const std::string key = std::string("time/") + stage + "_ms";
    ASSERT_TRUE(m.count(key)) << key;
    EXPECT_NEAR(m.at(key), own[stage], kClockSkewMs) << stage;
    sum += m.at(key);
  }
  EXPECT_NEAR(sum + m.at("time/other_ms"), m.at("time/step_ms"), 1e-9);  // exact by construction
  EXPECT_GE(m.at("time/other_ms"), 2.0 - kClockSkewMs);
  EXPECT_LE(m.at("time/step_ms"), outer_ms);  // the outer stopwatch encloses the step
  EXPECT_NEAR(m.at("time/step_ms"), outer_ms, kClockSkewMs);
}

TEST(StageTimer, LaterStagesAndSummary) {
  StageTimer timer;
  for (int step = 0; step < 4; ++step) {
    timer.begin_step();
    { auto s = timer.scope("forward"); }
    if (step == 3) {
      auto s = timer.scope("checkpoint");
    }
    const auto m = timer.end_step();
    EXPECT_EQ(m.count("time/checkpoint_ms"), step == 3 ? 1u : 0u);
  }
  EXPECT_EQ(timer.steps(), 4);
  const std::string table = timer.summary();
  for (const char* word : {"forward", "checkpoint", "other", "step", "p50", "p90", "share", "first step left out"}) {
    EXPECT_NE(table.find(word), std::string::npos) << word << " in\n" << table;
  }
}

TEST(StageTimer, DisabledOrOutsideAStepDoesNothing) {
  StageTimer off(false);
  off.begin_step();
  { auto s = off.scope("forward"); }
  EXPECT_TRUE(off.end_step().empty());
  EXPECT_EQ(off.summary(), "");
  StageTimer on;
  { auto s = on.scope("forward"); }  // before begin_step: ignored
  EXPECT_TRUE(on.end_step().empty());
  int syncs = 0;
  StageTimer synced(true, [&] { ++syncs; });
  synced.begin_step();
  { auto s = synced.scope("forward"); }
  synced.end_step();
  EXPECT_EQ(syncs, 4);  // begin, scope open, scope close, end
}

}  // namespace
}  // namespace xtrain::monitor::stage_timer_test
