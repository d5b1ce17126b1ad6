// The run loop's tasks: what each fills from the data, its throughput unit, its FLOPs and text,
// and the error for a task the run loop does not know.
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/run/task.h"

namespace xtrain::task_test {
namespace {

TEST(Task, LanguageModellingTakesTheVocabularyAndCountsTokens) {
  const Task& lm = find_task("lm", "gpt");
  EXPECT_STREQ(lm.name(), "lm");
  models::ModelOptions mo;
  mo.vocab = 7;
  data::DatasetInfo info;
  info.kind = "text";
  info.vocab = 256;
  lm.fit_model(mo, info);
  EXPECT_EQ(mo.vocab, 256);
  EXPECT_EQ(mo.num_classes, 0);
  EXPECT_EQ(lm.units_per_sample(64), 64.0);
  data::Batch b{at::zeros({3, 5}, at::kLong), at::zeros({3, 5}, at::kLong)};
  EXPECT_EQ(lm.units_of(b), 15.0);
  EXPECT_STREQ(lm.short_unit(), "tok");
  EXPECT_TRUE(lm.sequences());
  EvalResult r;
  r.loss = std::log(2.0);  // perplexity 2, one bit per byte
  EXPECT_EQ(lm.describe_eval(r), "val loss 0.693147 (ppl 2, 1 bits/byte)");
  // PaLM's 6N + 12·L·T·C for the default GPT (checked in tests/models): positive and size-dependent.
  EXPECT_GT(lm.train_flops_per_unit(mo), 0.0);
}

TEST(Task, ClassificationTakesClassesAndInputSizeOnlyWhenUnset) {
  const Task& c = find_task("classify", "mlp");
  data::DatasetInfo info;
  info.kind = "image";
  info.num_classes = 10;
  info.sample_shape = {1, 28, 28};
  models::ModelOptions mo;
  mo.num_classes = 0;
  mo.in_features = 0;
  const int64_t vocab = mo.vocab;
  c.fit_model(mo, info);
  EXPECT_EQ(mo.num_classes, 10);
  EXPECT_EQ(mo.in_features, 784);
  EXPECT_EQ(mo.vocab, vocab);
  models::ModelOptions set;
  set.num_classes = 3;
  set.in_features = 5;
  c.fit_model(set, info);
  EXPECT_EQ(set.num_classes, 3);
  EXPECT_EQ(set.in_features, 5);
  data::Batch b{at::zeros({4, 1, 28, 28}), at::zeros({4}, at::kLong)};
  EXPECT_EQ(c.units_of(b), 4.0);
  EXPECT_EQ(c.units_per_sample(64), 1.0);
  EXPECT_EQ(c.train_flops_per_unit(set), 0.0);
  EXPECT_FALSE(c.sequences());
  EvalResult r;
  r.loss = 0.5;
  r.accuracy = 0.25;
  EXPECT_EQ(c.describe_eval(r), "val loss 0.5 | val accuracy 25%");
}

TEST(Task, UnknownTaskNamesTheModelType) {
  try {
    find_task("segment", "unet");
    FAIL() << "unknown task accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.model.type \"unet\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::task_test
