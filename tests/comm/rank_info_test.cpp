// rank_info_from_env over environment maps: torchrun, Slurm, Open MPI, single process, and the
// errors that name the malformed variable.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/rank_info.h"

namespace xtrain::comm {
namespace {

TEST(RankInfo, TorchrunVariables) {
  const auto r = rank_info_from_env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                     {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(r.source, "torchrun");
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 2);
  EXPECT_EQ(r.master_addr, "10.0.0.7");
  EXPECT_EQ(r.master_port, 1234);
}

TEST(RankInfo, TorchrunWinsOverSlurmAndDefaultsLocalToGlobal) {
  const auto r = rank_info_from_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}});
  EXPECT_EQ(r.source, "torchrun");
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 2);
  EXPECT_EQ(r.master_addr, "127.0.0.1");
  EXPECT_EQ(r.master_port, kDefaultMasterPort);
}

TEST(RankInfo, SlurmVariables) {
  const EnvMap env{{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "7"},
                   {"SLURM_LOCALID", "0"},         {"SLURM_NODEID", "2"},
                   {"SLURM_TASKS_PER_NODE", "2(x2),3"}, {"SLURM_JOB_NODELIST", "gpu-[003-005,009]"},
                   {"SLURM_LAUNCH_NODE_IPADDR", "10.1.1.1"}, {"SLURM_JOB_ID", "123456"}};
  const auto r = rank_info_from_env(env);
  EXPECT_EQ(r.source, "slurm");
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 7);
  EXPECT_EQ(r.local_world_size, 3);  // node 2 is the "3" entry
  EXPECT_EQ(r.master_addr, "gpu-003");
  EXPECT_EQ(r.master_port, kDefaultMasterPort + 123456 % 10000);
  auto with_per_node = env;
  with_per_node["SLURM_NTASKS_PER_NODE"] = "4";
  with_per_node["MASTER_ADDR"] = "head";
  with_per_node["MASTER_PORT"] = "29999";
  const auto s = rank_info_from_env(with_per_node);
  EXPECT_EQ(s.local_world_size, 4);
  EXPECT_EQ(s.master_addr, "head");
  EXPECT_EQ(s.master_port, 29999);
  auto no_list = env;
  no_list.erase("SLURM_JOB_NODELIST");
  EXPECT_EQ(rank_info_from_env(no_list).master_addr, "10.1.1.1");
}

TEST(RankInfo, SlurmCompressedLists) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_THROW(slurm_tasks_on_node("2(x3),1", 4), UsageError);
  EXPECT_EQ(slurm_first_host("node1"), "node1");
  EXPECT_EQ(slurm_first_host("a,b[1-2]"), "a");
  EXPECT_EQ(slurm_first_host("node[01-04]"), "node01");
  EXPECT_EQ(slurm_first_host("rack[7,9]-gpu,x"), "rack7-gpu");
  EXPECT_EQ(slurm_first_host("gpu-[003-010,012],cpu1"), "gpu-003");
}

TEST(RankInfo, OpenMpiVariables) {
  const auto r = rank_info_from_env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(r.source, "openmpi");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.local_rank, 2);
  EXPECT_EQ(r.master_addr, "127.0.0.1");
  // Several nodes without MASTER_ADDR: rank 0's address is unknown.
  EXPECT_THROW(rank_info_from_env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
               UsageError);
}

TEST(RankInfo, SingleProcessWhenNothingIsSet) {
  const auto r = rank_info_from_env(EnvMap{{"PATH", "/bin"}});
  EXPECT_EQ(r.source, "single");
  EXPECT_EQ(r.world_size, 1);
  EXPECT_EQ(r.rank, 0);
}

TEST(RankInfo, MalformedVariablesAreNamed) {
  auto message = [](const EnvMap& env) {
    try {
      rank_info_from_env(env);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({{"RANK", "one"}, {"WORLD_SIZE", "2"}}).find("RANK must be a non-negative integer, got 'one'"),
            std::string::npos);
  EXPECT_NE(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 is not below WORLD_SIZE=2"), std::string::npos);
  EXPECT_NE(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT"),
            std::string::npos);
}

}  // namespace
}  // namespace xtrain::comm
