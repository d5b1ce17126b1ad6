// csv: a CSV table to standardised features and class indices — quoting, the label set and its
// order, the held-out split standardised with the training statistics (checked against a float64
// closed form), and each bad input's error naming the file, line and column.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/data/csv_dataset.h"
#include "xtrain/data/registry.h"

namespace xtrain::data::csv_dataset_test {
namespace {

using xtrain::testing::expect_usage_error;

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CsvDataset, ParsesQuotedFieldsAndSkipsBlankLines) {
  const auto t = parse_csv("a,\"b, c\",d\r\n\n1,\"x \"\"y\"\"\",3\n4,5,6\n", "t.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"a", "b, c", "d"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0][1], "x \"y\"");
  EXPECT_EQ(t.lines, (std::vector<int64_t>{3, 4}));
}

TEST(CsvDataset, LabelsSortNumericallyWhenAllAreNumbers) {
  EXPECT_EQ(label_classes({"10", "2", "-1", "2"}), (std::vector<std::string>{"-1", "2", "10"}));
  EXPECT_EQ(label_classes({"no", "yes", "no"}), (std::vector<std::string>{"no", "yes"}));
}

TEST(CsvDataset, StandardisationIsMeanAndPopulationStd) {
  const at::Tensor x = at::tensor({1.0, 10.0, 2.0, 10.0, 6.0, 10.0}, at::kDouble).view({3, 2});
  const auto s = fit_standardization(x);
  // Closed form: column 0 is {1, 2, 6}: mean 3, population variance (4 + 1 + 9) / 3; column 1 is constant.
  EXPECT_DOUBLE_EQ(s.mean[0].item<double>(), 3.0);
  EXPECT_DOUBLE_EQ(s.std[0].item<double>(), std::sqrt(14.0 / 3.0));
  EXPECT_DOUBLE_EQ(s.std[1].item<double>(), 1.0);  // a constant column keeps std 1
}

TEST(CsvDataset, SplitsAndStandardisesValidationWithTrainingStatistics) {
  const std::string dir = testing::temp_dir("csv-open");
  std::string text = "id,income,debt,default\n";
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    text += std::to_string(1000 + i) + "," + std::to_string(i) + "," + std::to_string(3 * i + 7) + "," +
            (i >= 25 ? "yes" : "no") + "\n";
  }
  DataOptions o;
  o.type = "csv";
  o.path = write(dir, "loans.csv", text);
  o.label = "default";
  o.features = {"income", "debt"};
  o.val_fraction = 0.25;
  const auto splits = find_dataset("csv").open(o, 0, dir);
  ASSERT_EQ(splits.train->size(), 30);
  ASSERT_EQ(splits.val->size(), 10);
  const auto info = splits.train->info();
  EXPECT_EQ(info.num_classes, 2);
  EXPECT_EQ(info.class_names, (std::vector<std::string>{"no", "yes"}));
  EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{2}));
  const auto& train = dynamic_cast<const TabularDataset&>(*splits.train);
  const auto& val = dynamic_cast<const TabularDataset&>(*splits.val);
  const at::Tensor tx = train.features().to(at::kDouble);
  // The training split is standardised by its own statistics: mean 0, population std 1 (fp32 storage).
  EXPECT_LT(tx.mean(0).abs().max().item<double>(), 1e-6);
  EXPECT_LT((tx.pow(2).mean(0) - 1).abs().max().item<double>(), 1e-5);
  // income is 0..39: with one affine map for both splits, all 40 standardised values are equally
  // spaced; validation standardised by its own statistics would break the spacing.
  const at::Tensor all = std::get<0>(at::cat({tx.select(1, 0), val.features().to(at::kDouble).select(1, 0)}).sort());
  const at::Tensor gaps = all.slice(0, 1) - all.slice(0, 0, -1);
  EXPECT_LT((gaps - gaps.mean()).abs().max().item<double>(), 1e-5);
  // debt = 3 income + 7 is the same column after standardisation.
  EXPECT_LT((tx.select(1, 0) - tx.select(1, 1)).abs().max().item<double>(), 1e-5);
  // The statistics kept in the run (standardization.json) undo the standardisation of both splits:
  // the 40 incomes come back as exactly 0..39.
  ASSERT_EQ(info.run_files.size(), 1u);
  EXPECT_EQ(info.run_files[0].first, "standardization.json");
  const auto stats = nlohmann::json::parse(info.run_files[0].second);
  EXPECT_EQ(stats["features"], nlohmann::json({"income", "debt"}));
  const double mean = stats["mean"][0], std = stats["std"][0];
  const at::Tensor raw = std::get<0>((all * std + mean).sort());
  EXPECT_LT((raw - at::arange(n, at::kDouble)).abs().max().item<double>(), 1e-4);
  // Labels follow their rows: "yes" (class 1) exactly where income >= 25.
  const double z25 = all[25].item<double>();
  for (const auto* d : {&train, &val}) {
    const at::Tensor income = d->features().select(1, 0).to(at::kDouble);
    EXPECT_TRUE(at::equal(d->labels(), income.ge(z25 - 1e-6).to(at::kLong)));
  }
}

TEST(CsvDataset, ErrorsNameTheFileLineAndColumn) {
  const std::string dir = testing::temp_dir("csv-errors");
  auto open = [&](const std::string& text, const std::string& label, std::vector<std::string> features = {}) {
    DataOptions o;
    o.type = "csv";
    o.path = write(dir, "t.csv", text);
    o.label = label;
    o.features = std::move(features);
    return expect_usage_error([&] { open_csv_dataset(o, 0, dir); });
  };
  const std::string good = "income,age,label\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n";
  EXPECT_NE(open(good, "lable").find("has no column \"lable\" (xtrain.data.label)"), std::string::npos);
  EXPECT_NE(open(good, "lable").find("label"), std::string::npos);  // did you mean
  const auto missing = open(good, "label", {"incme"});
  EXPECT_NE(missing.find("has no column \"incme\" (xtrain.data.features)"), std::string::npos) << missing;
  EXPECT_NE(missing.find("income"), std::string::npos) << missing;
  const auto bad = open("income,age,label\n1,2,0\n3,n/a,1\n", "label");
  EXPECT_NE(bad.find("t.csv:3: column \"age\" holds \"n/a\", not a number"), std::string::npos) << bad;
  EXPECT_NE(open("", "label").find("is empty"), std::string::npos);
  EXPECT_NE(open("income,label\n", "label").find("no data rows"), std::string::npos);
  EXPECT_NE(open("a,b,label\n1,2\n", "label").find("t.csv:2: 2 fields, the header has 3"), std::string::npos);
  DataOptions o;
  o.type = "csv";
  EXPECT_NE(expect_usage_error([&] { check_data_options(o); }).find("needs xtrain.data.label"), std::string::npos);
  o.type = "mnist";
  o.label = "y";
  EXPECT_NE(expect_usage_error([&] { check_data_options(o); }).find("read by the csv dataset"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::data::csv_dataset_test
