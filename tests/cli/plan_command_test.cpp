// `xtrain plan` as users call it: the config reaches the model (bf16 → 2-byte parameters, the batch
// triple, the preset shape with --set winning), --json is parseable, and bad input exits 2 naming
// the option. The numbers themselves are checked in tests/plan/cost_model_test.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/paths.h"

namespace xtrain::plan_command_test {
namespace {

int xtrain(const std::string& args, std::string* out) {
  return testing::run_command(testing::xtrain_binary() + " " + args + " 2>&1", out);
}

const char* kCluster = " --nodes 8 --gpus-per-node 8 --intra-bw 900GB/s --inter-bw 400Gbit/s --memory-per-gpu 80GB "
                       "--flops-per-gpu 312T --compute-efficiency 0.5";

TEST(PlanCommand, JsonCarriesTheConfig) {
  std::string out;
  ASSERT_EQ(xtrain(std::string("plan --model 7b --set bf16.enabled=true --set train_micro_batch_size_per_gpu=1 "
                               "--set train_batch_size=512 --set communication_data_type=fp32 --set "
                               "xtrain.model.seq_len=1024 --json") + kCluster, &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["model"]["layers"], 32);
  EXPECT_EQ(j["model"]["d_model"], 4096);
  EXPECT_EQ(j["model"]["seq_len"], 1024);  // --set after the preset wins
  EXPECT_EQ(j["training"]["param_bytes"], 2);
  EXPECT_EQ(j["training"]["comm_bytes"], 4);
  EXPECT_EQ(j["training"]["train_batch"], 512);
  EXPECT_DOUBLE_EQ(j["cluster"]["inter"]["bytes_per_s"].get<double>(), 5e10);
  EXPECT_DOUBLE_EQ(j["cluster"]["flops_per_s"].get<double>(), 1.56e14);
  ASSERT_EQ(j["layouts"].size(), 7u);
  EXPECT_EQ(j["layouts"][0]["name"], "DP");
  EXPECT_EQ(j["layouts"][0]["grad_accum"], 8);  // 512 / (1 x 64)
  EXPECT_FALSE(j["layouts"][0]["fits"].get<bool>());  // 16 bytes x 6.7B parameters > 80 GB
  EXPECT_TRUE(j["recommended"].is_string());
}

TEST(PlanCommand, TextNamesTheRecommendationAndAssumptions) {
  std::string out;
  ASSERT_EQ(xtrain(std::string("plan --model gpt2-small --set bf16.enabled=true --set train_micro_batch_size_per_gpu=4") +
                       kCluster, &out), 0) << out;
  EXPECT_NE(out.find("recommended: "), std::string::npos) << out;
  EXPECT_NE(out.find("assumptions:"), std::string::npos) << out;
}

TEST(PlanCommand, BadInputExitsTwoNamingTheOption) {
  std::string out;
  EXPECT_EQ(xtrain("plan --nodes 2 --inter-bw 400 --memory-per-gpu 80GB --flops-per-gpu 1T", &out), 2);
  EXPECT_NE(out.find("--inter-bw 400: no unit"), std::string::npos) << out;
  EXPECT_EQ(xtrain("plan --nodes 2 --memory-per-gpu 80GB --flops-per-gpu 1T", &out), 2);
  EXPECT_NE(out.find("--inter-bw is required"), std::string::npos) << out;
  EXPECT_EQ(xtrain(std::string("plan --model gpt2-small --tp 5") + kCluster, &out), 2);
  EXPECT_NE(out.find("does not divide heads 12"), std::string::npos) << out;
  EXPECT_EQ(xtrain(std::string("plan --set xtrain.model.type=mlp") + kCluster, &out), 2);
  EXPECT_NE(out.find("xtrain.model.type is mlp"), std::string::npos) << out;
}

}  // namespace
}  // namespace xtrain::plan_command_test
