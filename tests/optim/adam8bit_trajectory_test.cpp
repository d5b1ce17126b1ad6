// 200 steps of the default GPT recipe (configs/default.json: AdamW lr 2e-3, betas 0.9/0.95, weight
// decay 0.1, warmup + cosine, clipping 1.0; its data, Moby-Dick) at tiny sizes, with fp32 and with
// 8-bit optimizer state: the same batches, so the loss curves differ only by the quantised moments.
// (A synthetic corpus the model memorises is no good here: near zero loss any delay is a large
// relative difference.)
// Tolerance: every logged training loss (every 10 steps) within 3% of fp32's, the mean of the last
// 100 steps' logged losses and the final validation loss within 1.5%.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>

#include "support/paths.h"
#include "xtrain/run/train.h"

namespace xtrain::adam8bit_trajectory_test {
namespace {

TrainRequest tiny_gpt(const std::string& run_dir, const std::string& state_dtype) {
  TrainRequest r;
  r.output = run_dir;
  r.overrides = {"xtrain.model.layers=2", "xtrain.model.d_model=64",
                 "xtrain.model.heads=2", "xtrain.model.seq_len=64", "train_micro_batch_size_per_gpu=8",
                 "xtrain.steps=200", "xtrain.eval_interval=200", "xtrain.eval_batches=8",
                 "xtrain.save_interval=0", "xtrain.generate.tokens=0", "xtrain.log_interval=10",
                 "xtrain.data.prefetch=0", "optimizer.params.state_dtype=" + state_dtype};
  return r;
}

std::map<int64_t, double> losses(const std::string& run_dir) {
  std::map<int64_t, double> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("train/loss")) out[j["step"].get<int64_t>()] = j["train/loss"].get<double>();
  }
  return out;
}

TEST(Adam8bit, TinyGptLossCurveFollowsFp32AdamW) {
  const std::string dir = testing::temp_dir("adam8bit-gpt");
  const auto fp32 = train(tiny_gpt(dir + "/fp32", "fp32"));
  const auto int8 = train(tiny_gpt(dir + "/int8", "int8"));
  const auto a = losses(dir + "/fp32"), b = losses(dir + "/int8");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GE(a.size(), 20u);
  double max_rel = 0, tail_a = 0, tail_b = 0;
  bool differs = false;
  for (const auto& [step, loss] : a) {
    const double rel = std::abs(b.at(step) - loss) / loss;
    max_rel = std::max(max_rel, rel);
    differs = differs || b.at(step) != loss;
    EXPECT_LT(rel, 0.03) << "step " << step << ": fp32 " << loss << ", 8-bit " << b.at(step);
    if (step > 100) {
      tail_a += loss;
      tail_b += b.at(step);
    }
  }
  EXPECT_TRUE(differs) << "the 8-bit run gave fp32's losses exactly: was the state quantised at all?";
  EXPECT_LT(std::abs(tail_b - tail_a) / tail_a, 0.015) << "mean loss of steps 101-200";
  const double va = fp32.final_eval.loss, vb = int8.final_eval.loss;
  EXPECT_LT(std::abs(vb - va) / va, 0.015) << "validation loss: fp32 " << va << ", 8-bit " << vb;
  std::cout << "[ measured ] max relative loss difference " << max_rel << ", validation fp32 " << va << " 8-bit " << vb
            << ", first loss " << a.begin()->second << ", last " << a.rbegin()->second << "\n";
}

}  // namespace
}  // namespace xtrain::adam8bit_trajectory_test
