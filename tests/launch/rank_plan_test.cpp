// Rank numbering (host by host, slot by slot) and each rank's torchrun-style environment.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/launch/rank_plan.h"

namespace xtrain::launch::rank_plan_test {
namespace {

TEST(RankPlan, OneLauncherPerNode) {
  const auto p = plan_node(4, 2, 1, "10.0.0.1", 1234);
  EXPECT_EQ(p.world_size, 8);
  ASSERT_EQ(p.ranks.size(), 4u);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(p.ranks[l].rank, 4 + l);
    EXPECT_EQ(p.ranks[l].local_rank, l);
    EXPECT_EQ(p.ranks[l].node_rank, 1);
    EXPECT_TRUE(p.ranks[l].host.empty());
  }
  // Loopback given explicitly: every "node" on this machine (tests); a missing --master-addr with
  // several nodes is the launcher's error (LauncherPeers.SeveralNodesNeedAMasterAddress).
  EXPECT_EQ(plan_node(2, 2, 1, "127.0.0.1", 29500).ranks.front().rank, 2);
  EXPECT_THROW(plan_node(2, 2, 2, "10.0.0.1", 29500), UsageError);
  EXPECT_THROW(plan_node(0, 1, 0, "127.0.0.1", 29500), UsageError);
}

TEST(RankPlan, HostfileNumbersHostByHostSlotBySlot) {
  const auto p = plan_hosts({{"worker-0", {0, 1}}, {"worker-1", {0, 2, 3}}}, "", 29500);
  EXPECT_EQ(p.master_addr, "worker-0");
  EXPECT_EQ(p.world_size, 5);
  EXPECT_EQ(p.nnodes, 2);
  ASSERT_EQ(p.ranks.size(), 5u);
  EXPECT_EQ(p.ranks[2].rank, 2);
  EXPECT_EQ(p.ranks[2].local_rank, 0);
  EXPECT_EQ(p.ranks[2].node_rank, 1);
  EXPECT_EQ(p.ranks[2].local_world_size, 3);
  EXPECT_EQ(p.ranks[2].host, "worker-1");
  const auto local = plan_hosts({{"localhost", {0, 1}}}, "", 29500);
  EXPECT_EQ(local.master_addr, "127.0.0.1");
  EXPECT_TRUE(local.ranks[1].host.empty());  // started without ssh
  EXPECT_THROW(plan_hosts({{"localhost", {0}}, {"worker-1", {0}}}, "", 29500), UsageError);
  EXPECT_EQ(plan_hosts({{"localhost", {0}}, {"worker-1", {0}}}, "10.1.1.1", 29500).master_addr, "10.1.1.1");
}

TEST(RankPlan, EnvironmentAndThreadPolicy) {
  const auto p = plan_node(2, 1, 0, "127.0.0.1", 4321);
  const auto env = rank_environment(p.ranks[1], p, /*cores=*/8, {});
  const Env expected{{"RANK", "1"},         {"LOCAL_RANK", "1"},      {"WORLD_SIZE", "2"},
                     {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "0"},   {"MASTER_ADDR", "127.0.0.1"},
                     {"MASTER_PORT", "4321"}, {"OMP_NUM_THREADS", "4"}, {"XTRAIN_THREADS", "4"}};
  EXPECT_EQ(env, expected);
  const auto user = rank_environment(p.ranks[0], p, 8, {{"OMP_NUM_THREADS", "3"}});
  EXPECT_EQ(user.at("OMP_NUM_THREADS"), "3");  // the user's choice wins
  EXPECT_EQ(user.at("XTRAIN_THREADS"), "4");
  EXPECT_EQ(threads_per_rank(2, 4), 1);
  EXPECT_EQ(threads_per_rank(16, 3), 5);
}

}  // namespace
}  // namespace xtrain::launch::rank_plan_test
