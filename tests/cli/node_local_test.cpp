// checkpoint.use_node_local_storage across nodes, on one machine: two per-node launchers on loopback
// (`xtrain launch --nnodes 2 --node-rank i`, one rank each), each "node" with its own --output.
// Each node's folder holds only its ranks' part; a rank killed mid-run restarts both nodes, which
// resume by gathering the parts, and the result equals one launcher training without a failure
// (fingerprint over every node's folder); a node whose part is gone is an error naming the node
// and the path; a single node's part is refused where the whole is needed. The same two launchers
// with one shared --output (the NFS case) reach the same result.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/multiprocess.h"
#include "support/paths.h"

namespace xtrain::node_local_test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTrain{
    "train", "--set", "xtrain.model.layers=1", "--set", "xtrain.model.d_model=32", "--set", "xtrain.model.heads=2",
    "--set", "xtrain.model.seq_len=32", "--set", "train_micro_batch_size_per_gpu=4", "--set", "xtrain.steps=6",
    "--set", "xtrain.save_interval=2", "--set", "xtrain.keep_checkpoints=0", "--set", "xtrain.eval_interval=0",
    "--set", "xtrain.eval_batches=2", "--set", "xtrain.generate.tokens=0", "--set", "xtrain.monitor.peak_tflops=1",
    "--set", "zero_optimization.stage=2"};

const testing::Env kThreads{{"OMP_NUM_THREADS", "1"}, {"XTRAIN_THREADS", "1"}};

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string run(const std::string& command, int expect = 0) {
  std::string out;
  EXPECT_EQ(testing::run_command(command, &out), expect) << command << "\n" << out;
  return out;
}

struct Outcome {
  int code[2] = {-1, -1};
  std::string log[2];
};

// Two launchers (node 0 and 1, one rank each); `outputs[i]` is node i's --output.
Outcome two_nodes(const std::string& dir, const std::string outputs[2], const std::vector<std::string>& extra,
                  const std::string& launcher_extra = "", const testing::Env& env = {}) {
  const int port = testing::free_port();
  testing::Process p[2];
  Outcome o;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> argv{testing::xtrain_binary(), "launch", "-N", "1", "--nnodes", "2", "--node-rank",
                                  std::to_string(i), "--master-addr", "127.0.0.1", "--master-port",
                                  std::to_string(port), "--grace-seconds", "3"};
    if (!launcher_extra.empty()) argv.insert(argv.end(), {"--max-restarts", launcher_extra});
    argv.push_back("--");
    argv.insert(argv.end(), kTrain.begin(), kTrain.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"--output", outputs[i]});
    testing::Env e = kThreads;
    e.insert(env.begin(), env.end());
    p[i] = testing::Process::start(argv, e, dir + "/node" + std::to_string(i) + ".log");
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(p[i].wait(120)) << "node " << i << " still runs";
    o.code[i] = p[i].exit_code();
    o.log[i] = read(dir + "/node" + std::to_string(i) + ".log");
  }
  return o;
}

std::string reference_fingerprint(const std::string& dir) {
  std::string words;
  for (const auto& w : kTrain) words += " " + w;
  run("OMP_NUM_THREADS=1 XTRAIN_THREADS=1 " + testing::xtrain_binary() + " launch -N 2 --master-port " +
      std::to_string(testing::free_port()) + " --" + words + " --output " + dir + "/ref");
  return run(testing::xtrain_binary() + " ckpt fingerprint " + dir + "/ref/checkpoints/global_step6");
}

TEST(NodeLocal, EachNodeKeepsItsPartAndAResumeGathersThem) {
  const std::string dir = testing::temp_dir("node-local");
  const std::string outs[2] = {dir + "/node0", dir + "/node1"};
  const Outcome o = two_nodes(dir, outs, {"--set", "checkpoint.use_node_local_storage=true"}, "1",
                              {{"XTRAIN_FAULT_AT_STEP", "3:1"}});
  ASSERT_EQ(o.code[0], 0) << o.log[0];
  ASSERT_EQ(o.code[1], 0) << o.log[1];
  EXPECT_NE(o.log[1].find("restart 1/1 from the latest checkpoint (global_step2)"), std::string::npos) << o.log[1];
  EXPECT_NE(o.log[0].find("gathered checkpoint global_step2 from 2 nodes"), std::string::npos) << o.log[0];
  // Node 1's folder holds rank 1's part only; node 0's rank 0's and the run's files.
  const std::string n0 = outs[0] + "/checkpoints/global_step6", n1 = outs[1] + "/checkpoints/global_step6";
  EXPECT_TRUE(fs::exists(n1 + "/trainer_rank1.json"));
  EXPECT_FALSE(fs::exists(n1 + "/trainer.json"));
  EXPECT_FALSE(fs::exists(n0 + "/trainer_rank1.json"));
  EXPECT_TRUE(fs::exists(n0 + "/config.json"));
  EXPECT_EQ(read(outs[1] + "/checkpoints/latest").substr(0, 12), "global_step6");
  EXPECT_FALSE(fs::exists(outs[0] + "/checkpoints/.gathered"));
  const std::string whole = run(testing::xtrain_binary() + " ckpt fingerprint " + n0 + " --node " + n1);
  EXPECT_EQ(whole, reference_fingerprint(dir));
  // One node's part alone is not the checkpoint.
  const std::string alone = run(testing::xtrain_binary() + " ckpt fingerprint " + n0, 2);
  EXPECT_NE(alone.find("is node 0's part of 2 (checkpoint.use_node_local_storage)"), std::string::npos) << alone;
  // consolidate given every node's run directory: one stage-0 checkpoint with the same weights.
  run(testing::xtrain_binary() + " ckpt consolidate " + outs[0] + " " + dir + "/whole --node " + outs[1]);
  EXPECT_FALSE(run(testing::xtrain_binary() + " ckpt fingerprint " + dir + "/whole").empty());

  // Node 1 lost its disk: the resume names the node and the path.
  fs::remove_all(n1);
  const Outcome lost = two_nodes(dir, outs, {"--set", "checkpoint.use_node_local_storage=true", "--resume"});
  EXPECT_NE(lost.code[0], 0);
  const std::string expected = "node 1 (rank 1) has no usable part at " + n1;
  EXPECT_NE(lost.log[0].find(expected), std::string::npos) << lost.log[0];
}

TEST(NodeLocal, TwoNodesWithASharedOutputMatchOneLauncher) {
  const std::string dir = testing::temp_dir("shared-output");
  const std::string outs[2] = {dir + "/run", dir + "/run"};
  const Outcome o = two_nodes(dir, outs, {});
  ASSERT_EQ(o.code[0], 0) << o.log[0];
  ASSERT_EQ(o.code[1], 0) << o.log[1];
  EXPECT_EQ(run(testing::xtrain_binary() + " ckpt fingerprint " + dir + "/run/checkpoints/global_step6"),
            reference_fingerprint(dir));
}

}  // namespace
}  // namespace xtrain::node_local_test
