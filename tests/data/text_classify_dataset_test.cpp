// text_classify: JSONL rows to token ids and class indices — the label set and its order, byte
// tokens truncated and padded with -1, the held-out split, and each bad input's error naming the
// file and line.
#include <gtest/gtest.h>

#include <fstream>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/registry.h"
#include "xtrain/data/text_classify_dataset.h"

namespace xtrain::data::text_classify_dataset_test {
namespace {

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The UsageError `f` throws, or a test failure.
std::string error_of(const std::function<void()>& f) { return xtrain::testing::expect_usage_error(f); }

TEST(TextClassifyDataset, LabelsSortNumericallyWhenAllAreIntegers) {
  std::vector<LabelledText> rows{{"a", "10", 1}, {"b", "2", 2}, {"c", "-1", 3}, {"d", "2", 4}};
  EXPECT_EQ(label_set(rows), (std::vector<std::string>{"-1", "2", "10"}));
  rows.push_back({"e", "ham", 5});
  EXPECT_EQ(label_set(rows), (std::vector<std::string>{"-1", "10", "2", "ham"}));  // byte order
}

TEST(TextClassifyDataset, ReadsStringAndIntegerLabelsAndSkipsBlankLines) {
  const std::string dir = testing::temp_dir("tc-read");
  const auto path = write(dir, "a.jsonl", "{\"text\": \"hi\", \"label\": 3}\n\n{\"text\": \"yo\", \"label\": \"x\"}\n");
  const auto rows = read_labelled_jsonl(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, "3");
  EXPECT_EQ(rows[1].text, "yo");
  EXPECT_EQ(rows[1].line, 3);
  const auto other = write(dir, "b.jsonl", "{\"body\": \"hi\", \"y\": \"p\"}\n");
  EXPECT_EQ(read_labelled_jsonl(other, {"body", "y"}).front().label, "p");
}

TEST(TextClassifyDataset, BytesAreTruncatedAndPaddedWithMinusOne) {
  const std::vector<LabelledText> rows{{"abc", "n", 1}, {"abcdefgh", "y", 2}};
  const auto byte = make_tokenizer(TokenizerSpec{});
  TextClassifyDataset ds(rows, {"n", "y"}, *byte, 5, "mem");
  ASSERT_EQ(ds.size(), 2);
  const auto b = ds.collate({1, 0});
  const std::vector<int64_t> want{97, 98, 99, 100, 101, 97, 98, 99, -1, -1};
  EXPECT_EQ(std::vector<int64_t>(b.input.data_ptr<int64_t>(), b.input.data_ptr<int64_t>() + 10), want);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(b.target[0].item<int64_t>(), 1);
  EXPECT_EQ(b.target[1].item<int64_t>(), 0);
  const auto info = ds.info();
  EXPECT_EQ(info.vocab, 256);
  EXPECT_EQ(info.num_classes, 2);
  EXPECT_EQ(info.class_names, (std::vector<std::string>{"n", "y"}));
}

TEST(TextClassifyDataset, MissingTextFieldNamesFileAndLine) {
  const std::string dir = testing::temp_dir("tc-missing");
  const auto path = write(dir, "t.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"txt\": \"b\", \"label\": 0}\n");
  const auto msg = error_of([&] { read_labelled_jsonl(path); });
  EXPECT_NE(msg.find(path + ":2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no \"text\" field"), std::string::npos) << msg;
  EXPECT_NE(msg.find("xtrain.data.args.text_field"), std::string::npos) << msg;
  const auto bad_json = write(dir, "j.jsonl", "{\"text\": \"a\", \"label\": 1}\n{oops\n");
  EXPECT_NE(error_of([&] { read_labelled_jsonl(bad_json); }).find(bad_json + ":2: not valid JSON"), std::string::npos);
  const auto bad_label = write(dir, "l.jsonl", "{\"text\": \"a\", \"label\": 1.5}\n");
  EXPECT_NE(error_of([&] { read_labelled_jsonl(bad_label); }).find("must be a string or an integer, got 1.5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_labelled_jsonl(dir + "/none.jsonl"); }).find("not found"), std::string::npos);
}

TEST(TextClassifyDataset, UnknownLabelInValidationNamesTheLine) {
  const std::string dir = testing::temp_dir("tc-unknown");
  DataOptions o;
  o.type = "text_classify";
  o.path = write(dir, "train.jsonl", "{\"text\": \"a\", \"label\": \"ham\"}\n{\"text\": \"b\", \"label\": \"spam\"}\n");
  const auto val = write(dir, "val.jsonl", "{\"text\": \"c\", \"label\": \"ham\"}\n{\"text\": \"d\", \"label\": \"eggs\"}\n");
  o.args = {{"val_path", val}};
  const auto msg = error_of([&] { find_dataset("text_classify").open(o, 8, dir); });
  EXPECT_NE(msg.find(val + ":2: label \"eggs\" is not one of the training file's labels (ham, spam)"),
            std::string::npos) << msg;
}

TEST(TextClassifyDataset, HoldsOutAFixedShareWithoutValPath) {
  const std::string dir = testing::temp_dir("tc-split");
  std::string text;
  for (int i = 0; i < 50; ++i) text += "{\"text\": \"row " + std::to_string(i) + "\", \"label\": " + std::to_string(i % 2) + "}\n";
  DataOptions o;
  o.type = "text_classify";
  o.path = write(dir, "all.jsonl", text);
  o.val_fraction = 0.2;
  const auto s = find_dataset("text_classify").open(o, 8, dir);
  EXPECT_EQ(s.train->size(), 40);
  EXPECT_EQ(s.val->size(), 10);
  const auto again = find_dataset("text_classify").open(o, 8, dir);
  const auto ids = [](const Splits& sp) { return sp.val->collate({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}).input; };
  EXPECT_TRUE(ids(s).equal(ids(again)));  // the same rows every time
}

TEST(TextClassifyDataset, BadSettingsNameTheKey) {
  DataOptions o;
  o.type = "text_classify";
  EXPECT_NE(error_of([&] { check_data_options(o); }).find("text_classify needs xtrain.data.path"), std::string::npos);
  o.path = "x.jsonl";
  o.args = {{"val_file", "v.jsonl"}};
  EXPECT_NE(error_of([&] { check_data_options(o); }).find("xtrain.data.args.val_file is not a text_classify setting"),
            std::string::npos);
  const std::string dir = testing::temp_dir("tc-tok");
  o.path = write(dir, "t.jsonl", "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 1}\n");
  o.args = {{"tokenizer", "/nonexistent"}, {"val_path", o.path}};
  EXPECT_NE(error_of([&] { find_dataset("text_classify").open(o, 8, dir); }).find("xtrain.data.args.tokenizer"),
            std::string::npos);
}

}  // namespace
}  // namespace xtrain::data::text_classify_dataset_test
