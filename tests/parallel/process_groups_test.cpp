// make_parallel_groups over real Gloo groups: each rank's tensor-, data- and pipeline-parallel
// group holds the ranks the order string puts there (closed forms for 4 ranks), and an all-reduce
// over each group sums exactly those ranks.
#include <ATen/ops/full.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/comm/rank_info.h"
#include "xtrain/parallel/process_groups.h"

namespace xtrain::process_groups_test {
namespace {

// The world ranks of `group`, checked by an all-reduce of each member's world rank.
std::vector<int> members(comm::Communicator& group, int world_rank) {
  at::Tensor t = at::full({1}, static_cast<double>(world_rank), at::kDouble);
  group.all_reduce(t);
  double sum = 0;
  for (int q : group.global_ranks()) sum += q;
  EXPECT_EQ(t.item<double>(), sum) << "all_reduce over " << group.name();
  return group.global_ranks();
}

TEST(ProcessGroupsWorker, Build) {
  XTRAIN_WORKER_ONLY();
  comm::CommOptions o;
  o.timeout_seconds = 30;
  auto world = comm::Communicator::create(comm::rank_info_from_env(), o);
  const std::string order = testing::worker_env("XTRAIN_TEST_ORDER");
  const int tp = std::stoi(testing::worker_env("XTRAIN_TEST_TP")), pp = std::stoi(testing::worker_env("XTRAIN_TEST_PP"));
  const auto g = parallel::make_parallel_groups(world, tp, pp, order);
  const int r = world->rank();
  EXPECT_EQ(g.grid.order(), order);
  // Expected groups of 4 ranks, by hand from the order (the first axis varies fastest).
  std::vector<int> want_tp, want_dp, want_pp;
  if (order == "tp-dp-pp" && tp == 2 && pp == 1) {  // tp {0,1} {2,3}; dp {0,2} {1,3}
    want_tp = {r - r % 2, r - r % 2 + 1};
    want_dp = {r % 2, r % 2 + 2};
    want_pp = {r};
  } else if (order == "dp-tp-pp" && tp == 2 && pp == 1) {  // dp {0,1} {2,3}; tp {0,2} {1,3}
    want_tp = {r % 2, r % 2 + 2};
    want_dp = {r - r % 2, r - r % 2 + 1};
    want_pp = {r};
  } else if (order == "pp-tp-dp" && tp == 2 && pp == 2) {  // pp {0,1} {2,3}; tp {0,2} {1,3}; dp 1
    want_pp = {r - r % 2, r - r % 2 + 1};
    want_tp = {r % 2, r % 2 + 2};
    want_dp = {r};
  } else {
    FAIL() << "no expectation for order " << order << " tp " << tp << " pp " << pp;
  }
  EXPECT_EQ(members(*g.tp, r), want_tp);
  EXPECT_EQ(members(*g.dp, r), want_dp);
  EXPECT_EQ(members(*g.pp, r), want_pp);
  EXPECT_EQ(static_cast<int>(members(*g.mp, r).size()), tp * pp);
  EXPECT_EQ(g.embedding != nullptr, pp > 1);
}

void check(const std::string& order, int tp, int pp) {
  testing::WorkerOptions o;
  o.world_size = 4;
  o.env = {{"XTRAIN_TEST_ORDER", order}, {"XTRAIN_TEST_TP", std::to_string(tp)}, {"XTRAIN_TEST_PP", std::to_string(pp)}};
  testing::expect_workers_ok(testing::run_workers("ProcessGroupsWorker.Build", o));
}

TEST(ProcessGroups, TensorParallelNeighboursUnderTheDefaultOrder) { check("tp-dp-pp", 2, 1); }
TEST(ProcessGroups, DataParallelFirstPutsTensorPeersApart) { check("dp-tp-pp", 2, 1); }
TEST(ProcessGroups, PipelineFirstOrder) { check("pp-tp-dp", 2, 2); }

TEST(ProcessGroups, OneProcessIsItsOwnDataParallelGroup) {
  auto world = comm::Communicator::single();
  const auto g = parallel::make_parallel_groups(world, 1, 1);
  EXPECT_EQ(g.dp, world);
  EXPECT_FALSE(g.model_parallel());
  EXPECT_EQ(g.tp->size(), 1);
  EXPECT_EQ(g.pp->size(), 1);
}

}  // namespace
}  // namespace xtrain::process_groups_test
