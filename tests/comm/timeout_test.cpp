// Ranks that do not arrive: the error names the operation and the missing ranks instead of hanging.
// Timeouts are 1-2 s so the suite stays fast; no assertion is made on how long anything took.
#include <ATen/ops/ones.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::comm::timeout_test {
namespace {

CommOptions short_timeout(double seconds) {
  CommOptions o;
  o.timeout_seconds = seconds;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  return "(no CommError)";
}

// XTRAIN_TEST_SCENARIO: "skip" (rank 1 stays alive but never calls the second all-reduce) or
// "die" (rank 1 SIGKILLs itself after the first).
TEST(CommTimeoutWorker, MissingRank) {
  XTRAIN_WORKER_ONLY();
  const std::string scenario = testing::worker_env("XTRAIN_TEST_SCENARIO");
  const int rank = testing::worker_rank();
  // Ranks may start seconds apart on a loaded machine: only the collectives get the short timeout.
  auto c = Communicator::create(rank_info_from_env(), short_timeout(1), /*rendezvous_timeout_s=*/60);
  at::Tensor t = at::ones({8}, at::kFloat);
  c->all_reduce(t);  // #1: everyone
  if (rank == 1) {
    if (scenario == "die") {
      // Arrival records are written in the background within ~10 ms; let #1's land first so the
      // message can say where rank 1 was (without it, it would say "no collective").
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::raise(SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past rank 0's timeout
    return;
  }
  const auto m = error_of([&] { c->all_reduce(t); });
  EXPECT_NE(m.find("all_reduce #2 on world"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 1 did not arrive (rank 1 last started #1 all_reduce)"), std::string::npos) << m;
  EXPECT_NE(m.find("xtrain.comm.timeout_seconds"), std::string::npos) << m;
}

std::vector<testing::WorkerResult> run(const std::string& scenario) {
  testing::WorkerOptions o;
  o.world_size = 2;
  o.timeout_s = 30;
  o.env["XTRAIN_TEST_SCENARIO"] = scenario;
  return testing::run_workers("CommTimeoutWorker.MissingRank", o);
}

TEST(CommTimeout, RankThatSkipsACollectiveIsNamed) {
  const auto r = run("skip");
  EXPECT_EQ(r[0].exit_code, 0) << r[0].output;
  EXPECT_EQ(r[1].exit_code, 0) << r[1].output;
}

TEST(CommTimeout, KilledRankIsNamed) {
  const auto r = run("die");
  EXPECT_EQ(r[0].exit_code, 0) << r[0].output;
  EXPECT_EQ(r[1].exit_code, 128 + SIGKILL);
}

// Rendezvous with nobody else: run in this process, as the one rank that did arrive.
RankInfo alone(int rank, int world) {
  RankInfo info;
  info.rank = rank;
  info.world_size = world;
  info.master_port = testing::free_port();
  return info;
}

TEST(CommTimeout, RanksThatNeverJoinAreNamedByTheRendezvous) {
  const auto m = error_of([] { Communicator::create(alone(0, 3), short_timeout(1)); });
  EXPECT_NE(m.find("rendezvous of world"), std::string::npos) << m;
  EXPECT_NE(m.find("ranks 1, 2 did not arrive"), std::string::npos) << m;
}

TEST(CommTimeout, NoRankZeroMeansRankZeroDidNotArrive) {
  const auto m = error_of([] { Communicator::create(alone(1, 2), short_timeout(1)); });
  EXPECT_NE(m.find("rank 0 did not arrive"), std::string::npos) << m;
}

}  // namespace
}  // namespace xtrain::comm::timeout_test
