// `xtrain export` carries the run's tokenizer: a GPT trained on token shards of a SentencePiece BPE tokenizer
// (300 ids, not the byte tokenizer a reader would otherwise guess) is exported to safetensors and to ONNX;
// tokenizer/ beside each file loads as that tokenizer (same type, vocabulary and ids for a sentence as the
// one the shards were made with) and the command says where it went. A folder holding another tokenizer is
// not overwritten (exit 2, named), and nothing is exported into it.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/paths.h"
#include "xtrain/data/token_prepare.h"
#include "xtrain/data/tokenizer/tokenizer.h"
#include "xtrain/run/train.h"

namespace xtrain::export_tokenizer_test {
namespace {
namespace fs = std::filesystem;

std::string bpe_run(const std::string& dir) {
  data::PrepareOptions p;
  p.inputs = {testing::write_corpus(dir, 300, 17)};
  p.tokenizer.type = "bpe";
  p.tokenizer.vocab_size = 300;
  p.output = dir + "/shards";
  p.val_fraction = 0.1;
  data::prepare_tokens(p);
  TrainRequest r;
  r.output = dir + "/run";
  r.overrides = {"xtrain.data.type=tokens", "xtrain.data.path=" + p.output, "xtrain.model.layers=1",
                 "xtrain.model.d_model=16", "xtrain.model.heads=2", "xtrain.model.seq_len=8",
                 "train_micro_batch_size_per_gpu=2", "xtrain.steps=1", "xtrain.eval_interval=0",
                 "xtrain.save_interval=1", "xtrain.generate.tokens=0", "xtrain.data.prefetch=0"};
  train(r);
  return r.output;
}

void expect_run_tokenizer_at(const fs::path& folder, const std::string& shards) {
  ASSERT_TRUE(fs::exists(folder / "tokenizer.json")) << folder;
  const auto got = data::load_tokenizer(folder);
  const auto want = data::load_tokenizer(shards);  // what `data prepare` trained and tokenized with
  EXPECT_EQ(got->type(), "bpe");
  EXPECT_EQ(got->vocab_size(), 300);
  const std::string sentence = "the quick brown fox 7 jumps";
  EXPECT_EQ(got->encode(sentence), want->encode(sentence));
  EXPECT_EQ(got->decode(want->encode(sentence)), sentence);
}

TEST(ExportTokenizer, SafetensorsAndOnnxCarryTheRunsTokenizer) {
  const std::string dir = testing::temp_dir("export-tok");
  const std::string run = bpe_run(dir);
  const std::string bin = testing::xtrain_binary();
  std::string out;
  fs::create_directories(dir + "/st");
  ASSERT_EQ(testing::run_command(bin + " export --run " + run + " --safetensors " + dir + "/st/model.safetensors 2>&1",
                                 &out), 0) << out;
  EXPECT_NE(out.find("tokenizer: " + dir + "/st/tokenizer (bpe, 300 ids)"), std::string::npos) << out;
  expect_run_tokenizer_at(dir + "/st/tokenizer", dir + "/shards");
  // Again into the same folder: the same tokenizer is already there, which is fine.
  ASSERT_EQ(testing::run_command(bin + " export --run " + run + " --safetensors " + dir + "/st/again.safetensors 2>&1",
                                 &out), 0) << out;

  fs::create_directories(dir + "/onnx");
  ASSERT_EQ(testing::run_command(bin + " export --run " + run + " --onnx " + dir + "/onnx/model.onnx 2>&1", &out), 0)
      << out;
  EXPECT_NE(out.find("tokenizer: " + dir + "/onnx/tokenizer (bpe, 300 ids)"), std::string::npos) << out;
  expect_run_tokenizer_at(dir + "/onnx/tokenizer", dir + "/shards");

  // A folder whose tokenizer/ is another one's: refused by name, left as it was.
  fs::create_directories(dir + "/other/tokenizer");
  data::make_tokenizer(data::TokenizerSpec{})->save(dir + "/other/tokenizer");
  EXPECT_EQ(testing::run_command(bin + " export --run " + run + " --safetensors " + dir +
                                     "/other/model.safetensors 2>&1", &out), 2) << out;
  EXPECT_NE(out.find(dir + "/other/tokenizer already holds another tokenizer"), std::string::npos) << out;
  EXPECT_EQ(data::load_tokenizer(dir + "/other/tokenizer")->type(), "byte");
  EXPECT_FALSE(fs::exists(dir + "/other/model.safetensors"));
}

}  // namespace
}  // namespace xtrain::export_tokenizer_test
