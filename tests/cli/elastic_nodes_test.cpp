// Node loss under `xtrain launch --nnodes 1:2` with real training: two per-node launchers on
// loopback (one rank each, a shared --output), node 1's launcher killed by SIGKILL (its rank dies
// with it) after the first checkpoint. Node 0 re-forms the group alone, resumes the latest
// checkpoint at world size 1 (train_batch_size 8 stays: gradient accumulation 1 -> 2, ZeRO shards
// resharded on load) and finishes. The mathematics says the result must equal a fault-free
// one-rank run resumed from that same checkpoint; every checkpoint committed before the loss is
// still whole, and `latest` loads.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "support/multiprocess.h"
#include "support/paths.h"

namespace xtrain::elastic_nodes_test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTrain{
    "train", "--set", "xtrain.model.layers=1", "--set", "xtrain.model.d_model=32", "--set", "xtrain.model.heads=2",
    "--set", "xtrain.model.seq_len=32", "--set", "train_batch_size=8", "--set", "train_micro_batch_size_per_gpu=4",
    "--set", "xtrain.steps=10", "--set", "xtrain.save_interval=2", "--set", "xtrain.keep_checkpoints=0", "--set",
    "xtrain.eval_interval=0", "--set", "xtrain.eval_batches=2", "--set", "xtrain.generate.tokens=0", "--set",
    "xtrain.monitor.peak_tflops=1"};

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string fingerprint(const std::string& path) {
  std::string out;
  EXPECT_EQ(testing::run_command(testing::xtrain_binary() + " ckpt fingerprint " + path, &out), 0) << out;
  return out;
}

std::string shell_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += " " + w;
  return out;
}

testing::Process start_node(int node_rank, int port, const std::string& run, const std::string& log,
                            const std::vector<std::string>& extra) {
  std::vector<std::string> argv{testing::xtrain_binary(), "launch", "-N", "1", "--nnodes", "1:2", "--node-rank",
                                std::to_string(node_rank), "--master-addr", "127.0.0.1", "--master-port",
                                std::to_string(port), "--heartbeat-timeout", "3", "--grace-seconds", "3",
                                "--max-restarts", "1", "--"};
  argv.insert(argv.end(), kTrain.begin(), kTrain.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--output", run});
  return testing::Process::start(argv, {{"OMP_NUM_THREADS", "1"}, {"XTRAIN_THREADS", "1"}}, log);
}

void node_loss_matches_a_fault_free_resume(const std::string& tag, const std::vector<std::string>& extra) {
  const std::string dir = testing::temp_dir(tag), run = dir + "/run";
  const int port = testing::free_port();
  auto n0 = start_node(0, port, run, dir + "/node0.log", extra);
  auto n1 = start_node(1, port, run, dir + "/node1.log", extra);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(run + "/checkpoints/global_step2") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(run + "/checkpoints/global_step2")) << read(dir + "/node0.log");
  n1.signal(SIGKILL);  // node 1 is gone: its launcher, and its rank with it
  ASSERT_TRUE(n0.wait(90)) << read(dir + "/node0.log");
  const std::string log = read(dir + "/node0.log");
  ASSERT_EQ(n0.exit_code(), 0) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("restart 1/1 from the latest checkpoint \\((global_step(\\d+))\\)")))
      << log;
  const std::string resumed = m[1];
  ASSERT_LT(std::stoi(m[2]), 10) << "node 1 was lost only after the last checkpoint:\n" << log;
  EXPECT_NE(log.find("re-formed: 1 node (was 2), world size 1 (was 2)"), std::string::npos) << log;
  EXPECT_NE(log.find("saved at data-parallel size 2 (train_batch_size 8 = 4 micro x 1 accumulation x 2); "
                     "this run: data-parallel size 1 (train_batch_size 8 = 4 micro x 2 accumulation x 1)"),
            std::string::npos)
      << log;
  EXPECT_EQ(read(run + "/checkpoints/latest").substr(0, 13), "global_step10");
  // Nothing committed is lost: every checkpoint up to the one resumed from is still whole.
  for (int step = 2; step <= std::stoi(m[2]); step += 2) {
    EXPECT_FALSE(fingerprint(run + "/checkpoints/global_step" + std::to_string(step)).empty()) << step;
  }
  // The reference: the same checkpoint, resumed by one rank that never saw a failure.
  const std::string ref = dir + "/ref";
  fs::copy(run, ref, fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(ref + "/checkpoints")) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name != resumed) fs::remove_all(e.path());
  }
  std::ofstream(ref + "/checkpoints/latest") << resumed;
  std::string out;
  ASSERT_EQ(testing::run_command("OMP_NUM_THREADS=1 XTRAIN_THREADS=1 " + testing::xtrain_binary() + shell_words(kTrain) +
                                     shell_words(extra) + " --output " + ref + " --resume",
                                 &out),
            0)
      << out;
  EXPECT_EQ(fingerprint(run + "/checkpoints/global_step10"), fingerprint(ref + "/checkpoints/global_step10"));
}

TEST(ElasticNodes, NodeLossResumesAtTheSmallerSizeLikeAFaultFreeRun) {
  node_loss_matches_a_fault_free_resume("elastic-nodes", {});
}

TEST(ElasticNodes, ZeroStage2ShardsReshardWhenANodeIsLost) {
  node_loss_matches_a_fault_free_resume("elastic-nodes-zero2", {"--set", "zero_optimization.stage=2"});
}

}  // namespace
}  // namespace xtrain::elastic_nodes_test
