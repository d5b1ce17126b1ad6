// The run's tokenizer: chosen from the data config, saved by `xtrain train` in <run>/tokenizer/,
// and loaded back for generate (ids checked against the byte tokenizer's closed form: id == byte);
// a saved tokenizer larger than the model's vocabulary is a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/run/run_tokenizer.h"
#include "xtrain/run/train.h"

namespace xtrain::run_tokenizer_test {
namespace {
namespace fs = std::filesystem;

data::DataOptions data_options(const std::string& type, const std::string& path) {
  data::DataOptions o;
  o.type = type;
  o.path = path;
  return o;
}

// A small trained SentencePiece BPE tokenizer saved in `dir`.
void save_bpe(const std::string& dir) {
  const std::string corpus = testing::write_corpus(testing::temp_dir("run_tok_corpus"), 200, 13);
  data::TokenizerSpec spec;
  spec.type = "bpe";
  spec.vocab_size = 300;
  data::make_tokenizer(spec, {corpus})->save(dir);
}

TEST(RunTokenizer, ChosenFromTheDataConfig) {
  EXPECT_EQ(data_tokenizer(data_options("text", "mobydick"))->type(), "byte");
  EXPECT_EQ(data_tokenizer(data_options("mnist", "")), nullptr);
  const std::string folder = testing::temp_dir("run_tok_data");
  save_bpe(folder);
  EXPECT_EQ(data_tokenizer(data_options("tokens", folder))->type(), "bpe");  // tokenizer.json in the data folder
  auto o = data_options("text_classify", "x.jsonl");
  o.args = {{"tokenizer", folder}};
  EXPECT_EQ(data_tokenizer(o)->vocab_size(), 300);
  o.args = {{"tokenizer", "wordpiece"}};
  EXPECT_THROW(data_tokenizer(o), UsageError);
}

TEST(RunTokenizer, TrainSavesItAndGenerateUsesIt) {
  const std::string dir = testing::temp_dir("run_tok_train");
  const std::string corpus = testing::write_corpus(dir, 300, 17);
  TrainRequest r;
  r.output = dir + "/run";
  r.overrides = {"xtrain.data.path=" + corpus, "xtrain.model.layers=1", "xtrain.model.d_model=32",
                 "xtrain.model.heads=2", "xtrain.model.seq_len=16", "train_micro_batch_size_per_gpu=4",
                 "xtrain.steps=2", "xtrain.eval_interval=2", "xtrain.eval_batches=1", "xtrain.save_interval=2",
                 "xtrain.generate.tokens=0", "xtrain.data.prefetch=0"};
  train(r);
  ASSERT_TRUE(fs::exists(dir + "/run/tokenizer/tokenizer.json"));
  auto run = load_trained_run(dir + "/run");
  auto tokenizer = load_run_tokenizer(dir + "/run", run.config, run.model.options.vocab);
  EXPECT_EQ(tokenizer->type(), "byte");
  // The tokenizer overload with the byte tokenizer is the byte overload: same ids, same text.
  EXPECT_EQ(generate_text(run.model, *tokenizer, "the ", 12, 1.0, 0, 3), generate_text(run.model, "the ", 12, 1.0, 0, 3));

  save_bpe(dir + "/run/tokenizer");  // a tokenizer with more ids than the model has
  try {
    load_run_tokenizer(dir + "/run", run.config, run.model.options.vocab);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "run: " + dir + "/run's tokenizer (bpe) has 300 ids but the model's vocabulary "
                                     "is 256 (xtrain.model.vocab): the run was trained on other data");
  }
}

}  // namespace
}  // namespace xtrain::run_tokenizer_test
