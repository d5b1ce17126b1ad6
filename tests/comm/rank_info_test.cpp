// rank_info_from_env over environment maps: torchrun, Slurm, Open MPI, single process, and the
// errors that name the malformed variable.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/rank_info.h"

namespace xtrain::comm::rank_info_test {
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
  const EnvMap env{{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "7"}, {"SLURM_STEP_ID", "0"},
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
  // The step's node list wins over the job's (a step on part of the allocation).
  auto step = env;
  step["SLURM_STEP_NODELIST"] = "node[2-3]";
  EXPECT_EQ(rank_info_from_env(step).master_addr, "node2");
}

// sbatch's script (as `env` printed it in a 2-node, 4-task job): no step id, so it is not a rank.
TEST(RankInfo, SlurmBatchScriptIsNotARank) {
  EnvMap batch{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"},
               {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_JOB_NODELIST", "node[0-1]"}};
  try {
    rank_info_from_env(batch);
    ADD_FAILURE() << "the batch script was read as rank 0 of 4";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("start the ranks with srun"), std::string::npos) << e.what();
  }
  batch["SLURM_STEP_ID"] = "0";
  EXPECT_EQ(rank_info_from_env(batch).world_size, 4);
  EXPECT_EQ(rank_info_from_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).world_size, 1);
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

// Across nodes without MASTER_ADDR the master is mpirun's host, read from the URI Open MPI 4.1 gives
// every process (values as `mpirun -np 4 --host node0:2,node1:2 env` printed them).
TEST(RankInfo, OpenMpiMasterDefaultsToTheHostOfMpirun) {
  const std::string hnp = "1184432128.0;tcp://10.203.0.1:41173";
  EnvMap env{{"OMPI_COMM_WORLD_RANK", "2"},         {"OMPI_COMM_WORLD_SIZE", "4"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
             {"OMPI_MCA_ess_base_jobid", "1184432129"}, {"OMPI_MCA_orte_hnp_uri", hnp},
             {"OMPI_MCA_orte_local_daemon_uri", "1184432128.1;tcp://10.203.0.2:57327"}};
  const auto r = rank_info_from_env(env);
  EXPECT_EQ(r.master_addr, "10.203.0.1");
  EXPECT_EQ(r.master_port, 29500 + 8073);  // job family 1184432129 >> 16 = 18073
  // Rank 0 on mpirun's host: its local daemon is mpirun itself.
  env["OMPI_COMM_WORLD_RANK"] = "0";
  env["OMPI_MCA_orte_local_daemon_uri"] = hnp;
  EXPECT_EQ(rank_info_from_env(env).master_addr, "10.203.0.1");
  // Rank 0 elsewhere (mpirun on a login node): no default, the error says what to pass.
  env["OMPI_MCA_orte_local_daemon_uri"] = "1184432128.1;tcp://10.203.0.2:57327";
  try {
    rank_info_from_env(env);
    ADD_FAILURE() << "rank 0 away from mpirun's host was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("-x MASTER_ADDR="), std::string::npos) << e.what();
  }
  env["MASTER_ADDR"] = "node0";
  env["MASTER_PORT"] = "1234";
  const auto explicit_master = rank_info_from_env(env);
  EXPECT_EQ(explicit_master.master_addr, "node0");
  EXPECT_EQ(explicit_master.master_port, 1234);
}

TEST(RankInfo, OpenMpiHnpUri) {
  EXPECT_EQ(openmpi_hnp_address("1184432128.0;tcp://192.0.2.2:55365;tcp6://[fd00::2]:42511"), "192.0.2.2");
  EXPECT_EQ(openmpi_hnp_address("7.0;tcp://10.0.0.1,172.17.0.1:4567"), "10.0.0.1");
  EXPECT_THROW(openmpi_hnp_address("7.0;tcp6://[fd00::2]:4"), UsageError);
  EXPECT_THROW(openmpi_hnp_address("7.0;tcp://:4"), UsageError);
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

// srun and mpirun: LOCAL_WORLD_SIZE (read by the thread policy and the memory pool) is derived from
// their variables when missing; set by torchrun or by the user, it is left alone.
TEST(RankInfo, LocalWorldSizeToExportUnderSrunAndMpirun) {
  EXPECT_EQ(local_world_size_to_export({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "16"}, {"SLURM_STEP_ID", "0"},
                                        {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "4(x4)"},
                                        {"SLURM_JOB_NODELIST", "n[1-4]"}}),
            std::optional<int>(4));
  EXPECT_EQ(local_world_size_to_export({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
            std::optional<int>(2));
  EXPECT_EQ(local_world_size_to_export({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "1"}}),
            std::nullopt);
  EXPECT_EQ(local_world_size_to_export({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), std::nullopt);
  EXPECT_EQ(local_world_size_to_export({}), std::nullopt);
  // Malformed: nothing exported here; the run's own reading names the variable.
  EXPECT_EQ(local_world_size_to_export({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}), std::nullopt);
}

}  // namespace
}  // namespace xtrain::comm::rank_info_test
