// Fault injection through the real program: `xtrain launch -N 2 --max-restarts 1` with a rank killed
// by SIGKILL mid-run finishes with the same checkpoint fingerprint as a run that never failed; a
// rank killed while writing a checkpoint leaves the previous one `latest` and loadable.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/multiprocess.h"
#include "support/paths.h"

namespace xtrain::elastic_test {
namespace {

// A GPT small enough that 6 steps on 2 ranks take a few seconds.
const std::string kTrain =
    " train --set xtrain.model.layers=1 --set xtrain.model.d_model=32 --set xtrain.model.heads=2"
    " --set xtrain.model.seq_len=32 --set train_micro_batch_size_per_gpu=4 --set xtrain.steps=6"
    " --set xtrain.save_interval=2 --set xtrain.keep_checkpoints=0 --set xtrain.eval_interval=0"
    " --set xtrain.eval_batches=2 --set xtrain.generate.tokens=0 --set xtrain.monitor.peak_tflops=1";

std::string launch(const std::string& env, const std::string& launcher_args, const std::string& run, int* code,
                   const std::string& extra_sets = "") {
  std::string out;
  *code = testing::run_command(env + " " + testing::xtrain_binary() + " launch -N 2 --master-port " + std::to_string(testing::free_port()) + " " + launcher_args +
                                   " --" + kTrain + extra_sets + " --output " + run,
                               &out);
  return out;
}

std::string fingerprint(const std::string& path) {
  std::string out;
  EXPECT_EQ(testing::run_command(testing::xtrain_binary() + " ckpt fingerprint " + path, &out), 0) << out;
  return out;
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Elastic, RestartAfterAKilledRankReachesTheFaultFreeResult) {
  const std::string dir = testing::temp_dir("elastic-train");
  int code = -1;
  std::string out = launch("", "", dir + "/clean", &code);
  ASSERT_EQ(code, 0) << out;
  out = launch("XTRAIN_FAULT_AT_STEP=3:1", "--max-restarts 1", dir + "/faulty", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("restart 1/1 from the latest checkpoint (global_step2)"), std::string::npos) << out;
  EXPECT_EQ(fingerprint(dir + "/faulty/checkpoints/global_step6"), fingerprint(dir + "/clean/checkpoints/global_step6"));
}

TEST(Elastic, KillDuringACheckpointWriteLeavesThePreviousOneLoadable) {
  const std::string dir = testing::temp_dir("elastic-save");
  int code = -1;
  const std::string out = launch("XTRAIN_FAULT_IN_SAVE=4:1", "", dir + "/run", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_EQ(read(dir + "/run/checkpoints/latest").substr(0, 12), "global_step2");
  std::string eval;
  EXPECT_EQ(testing::run_command(testing::xtrain_binary() + " eval --run " + dir + "/run", &eval), 0) << eval;
  // The interrupted step-4 checkpoint was never committed, so a resume continues from step 2.
  EXPECT_FALSE(fingerprint(dir + "/run").empty());
}

// ZeRO-2: each rank writes its own optimizer-state shard; rank 1 dies in the middle of its step-4
// save (its shards written, the rest not). The step-2 checkpoint stays `latest`, consolidates and
// evaluates, and a resume continues from it.
TEST(Elastic, KillDuringAZeroShardWriteLeavesThePreviousCheckpointWhole) {
  const std::string dir = testing::temp_dir("elastic-zero-save");
  int code = -1;
  const std::string out = launch("XTRAIN_FAULT_IN_SAVE=4:1:mid", "", dir + "/run", &code, " --set zero_optimization.stage=2");
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("rank 1 kills itself at step 4"), std::string::npos) << out;
  EXPECT_EQ(read(dir + "/run/checkpoints/latest").substr(0, 12), "global_step2");
  std::string cmd_out;
  EXPECT_EQ(testing::run_command(testing::xtrain_binary() + " ckpt consolidate " + dir + "/run/checkpoints/global_step2 " +
                                     dir + "/whole",
                                 &cmd_out),
            0)
      << cmd_out;
  EXPECT_EQ(testing::run_command(testing::xtrain_binary() + " eval --run " + dir + "/run", &cmd_out), 0) << cmd_out;
}

// ZeRO-3 with the optimizer state and the parameter shards on NVMe: the live state is in files that
// the checkpoint copies from; a kill in the middle of the step-4 save leaves step 2 whole, and a
// resume from it (a fresh process, fresh NVMe files) trains on to the end.
TEST(Elastic, KillDuringANvmeOffloadedSaveLeavesThePreviousCheckpointWhole) {
  const std::string dir = testing::temp_dir("elastic-nvme-save");
  const std::string nvme = " --set zero_optimization.stage=3 --set zero_optimization.stage3_param_persistence_threshold=100"
                           " --set zero_optimization.offload_optimizer.device=nvme --set zero_optimization.offload_param.device=nvme"
                           " --set zero_optimization.offload_optimizer.nvme_path=" + dir + "/nvme"
                           " --set zero_optimization.offload_param.nvme_path=" + dir + "/nvme";
  int code = -1;
  std::string out = launch("XTRAIN_FAULT_IN_SAVE=4:1:mid", "", dir + "/run", &code, nvme);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("rank 1 kills itself at step 4"), std::string::npos) << out;
  EXPECT_EQ(read(dir + "/run/checkpoints/latest").substr(0, 12), "global_step2");
  std::string cmd_out;
  EXPECT_EQ(testing::run_command(testing::xtrain_binary() + " eval --run " + dir + "/run", &cmd_out), 0) << cmd_out;
  out = launch("", "", dir + "/run", &code, nvme + " --resume");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("done: 6 steps"), std::string::npos) << out;
}

}  // namespace
}  // namespace xtrain::elastic_test
