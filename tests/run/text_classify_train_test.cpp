// `xtrain train` on text classification end to end: a tiny synthetic JSONL whose label is a rule
// of its letters (three imbalanced classes) is learnt above chance in a few dozen steps; the run
// directory keeps the label set, metrics.jsonl the macro-F1 and the confusion matrix; an unknown
// validation label stops the run naming the line; `xtrain train --config configs/spam_classify.json`
// runs a few steps on the fetched SpamAssassin corpus.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/data/dataset.h"
#include "xtrain/run/train.h"

namespace xtrain::text_classify_train_test {
namespace {

// Class "a" draws its letters from "abc", "x" from "xyz", "m" from "mno"; 60/30/10 per cent.
std::string write_rows(const std::string& path, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    const int r = static_cast<int>(rng() % 10);
    const std::string label = r < 6 ? "a" : r < 9 ? "x" : "m";
    const std::string letters = label == "a" ? "abc" : label == "x" ? "xyz" : "mno";
    std::string text;
    for (int k = 0, len = 4 + static_cast<int>(rng() % 9); k < len; ++k) text += letters[rng() % 3];
    out << "{\"text\": \"" << text << "\", \"label\": \"" << label << "\"}\n";
  }
  return path;
}

TrainRequest request(const std::string& dir, const std::string& train, const std::string& val) {
  TrainRequest r;
  r.output = dir + "/run";
  r.overrides = {"xtrain.model.type=gpt_classifier", "xtrain.data.type=text_classify", "xtrain.data.path=" + train,
                 "xtrain.data.args={\"val_path\": \"" + val + "\"}", "xtrain.model.layers=1",
                 "xtrain.model.d_model=32", "xtrain.model.heads=2", "xtrain.model.seq_len=16",
                 "train_micro_batch_size_per_gpu=16", "optimizer.params.lr=0.01",
                 "scheduler.params.warmup_num_steps=5", "xtrain.steps=40", "xtrain.eval_interval=20",
                 "xtrain.eval_batches=0", "xtrain.save_interval=0", "xtrain.data.prefetch=0"};
  return r;
}

TEST(TextClassifyTrain, LearnsALetterRuleAboveChance) {
  const std::string dir = testing::temp_dir("tc-train");
  const auto train_path = write_rows(dir + "/train.jsonl", 400, 1);
  const auto val_path = write_rows(dir + "/val.jsonl", 100, 2);
  const auto result = train(request(dir, train_path, val_path));
  const auto& ev = result.final_eval;
  EXPECT_EQ(ev.samples, 100);
  EXPECT_EQ(ev.classes, 3);
  // Always answering the majority class scores accuracy ~0.6 and macro-F1 0.25.
  EXPECT_GT(ev.accuracy, 0.9);
  EXPECT_GT(ev.macro_f1, 0.8);
  EXPECT_EQ(read_file(dir + "/run/labels.json"), "[\"a\",\"m\",\"x\"]\n");
  const std::string metrics = read_file(dir + "/run/metrics.jsonl");
  EXPECT_NE(metrics.find("\"val/macro_f1\""), std::string::npos);
  EXPECT_NE(metrics.find("val/confusion_matrix"), std::string::npos);
  // `xtrain eval` on the run scores the same validation file the same way.
  std::string out;
  ASSERT_EQ(testing::run_command(testing::xtrain_binary() + " eval --run " + dir + "/run --full 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("val macro-F1: "), std::string::npos) << out;
  EXPECT_NE(out.find("true \\ predicted"), std::string::npos) << out;
}

TEST(TextClassifyTrain, UnknownValidationLabelNamesTheLine) {
  const std::string dir = testing::temp_dir("tc-train-bad");
  const auto train_path = write_rows(dir + "/train.jsonl", 20, 1);
  const std::string val_path = dir + "/val.jsonl";
  std::ofstream(val_path) << "{\"text\": \"abc\", \"label\": \"a\"}\n{\"text\": \"qq\", \"label\": \"q\"}\n";
  try {
    train(request(dir, train_path, val_path));
    FAIL() << "an unknown label was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(val_path + ":2: label \"q\""), std::string::npos) << e.what();
  }
}

TEST(TextClassifyTrain, SpamConfigRunsFromTheCommandLine) {
  const std::string data = data::default_cache_dir() + "/spam_assassin/train.jsonl";
  if (!std::ifstream(data).good()) GTEST_SKIP() << "no " << data << ": scripts/fetch-data fetches it";
  const std::string dir = testing::temp_dir("tc-spam");
  std::string out;
  const int rc = testing::run_command(testing::xtrain_binary() + " train --config " + testing::source_dir() +
                                          "/configs/spam_classify.json --set xtrain.steps=3 --set xtrain.eval_batches=2"
                                          " --set train_micro_batch_size_per_gpu=8 --output " + dir + "/run",
                                      &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("val macro-F1"), std::string::npos) << out;
  EXPECT_NE(out.find("val confusion matrix (16 samples)"), std::string::npos) << out;
  EXPECT_EQ(read_file(dir + "/run/labels.json"), "[\"easy_ham\",\"hard_ham\",\"spam\"]\n");
}

}  // namespace
}  // namespace xtrain::text_classify_train_test
