// Training on token shards (`xtrain.data.type: tokens`) end to end: a corpus prepared with
// `data prepare`'s code, then N straight steps against N/2 + resume + N/2 (the window sampler's
// state travels in the checkpoint like the other datasets'): the same checkpoint fingerprint.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/paths.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/data/token_prepare.h"
#include "xtrain/run/train.h"

namespace xtrain::token_data_trainer_test {
namespace {
namespace fs = std::filesystem;

TrainRequest tiny_tokens(const std::string& shards, const std::string& run_dir, int64_t steps) {
  TrainRequest r;
  r.output = run_dir;
  r.overrides = {"xtrain.data.type=tokens", "xtrain.data.path=" + shards, "xtrain.model.layers=1",
                 "xtrain.model.d_model=32", "xtrain.model.heads=2", "xtrain.model.seq_len=16",
                 "xtrain.model.dropout=0.1", "train_micro_batch_size_per_gpu=4", "gradient_accumulation_steps=2",
                 "xtrain.steps=" + std::to_string(steps), "xtrain.eval_interval=3", "xtrain.eval_batches=2",
                 "xtrain.save_interval=4", "xtrain.generate.tokens=0", "xtrain.data.prefetch=1"};
  return r;
}

TEST(TokenDataTrainer, ResumeIsExact) {
  const std::string dir = testing::temp_dir("tokens-resume");
  data::PrepareOptions p;
  p.inputs = {testing::write_corpus(dir, 400, 17)};
  p.tokenizer.type = "byte";
  p.output = dir + "/shards";
  p.val_fraction = 0.1;
  data::prepare_tokens(p);
  train(tiny_tokens(p.output, dir + "/straight", 8));
  train(tiny_tokens(p.output, dir + "/split", 4));
  auto again = tiny_tokens(p.output, dir + "/split", 8);
  again.resume = true;
  train(again);
  EXPECT_EQ(checkpoint::fingerprint(dir + "/straight"), checkpoint::fingerprint(dir + "/split"));
  auto other = tiny_tokens(p.output, dir + "/other", 8);
  other.overrides.push_back("xtrain.seed=99");
  train(other);
  EXPECT_NE(checkpoint::fingerprint(dir + "/straight"), checkpoint::fingerprint(dir + "/other"));
  EXPECT_TRUE(fs::exists(dir + "/straight/tokenizer/tokenizer.json"));  // the run keeps the data's tokenizer
}

}  // namespace
}  // namespace xtrain::token_data_trainer_test
