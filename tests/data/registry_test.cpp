// The dataset registry: built-ins are entries, open_datasets asks the registry (a registered
// dataset receives xtrain.data.args and the model's seq_len), bad entries are refused, and an
// unknown name fails naming xtrain.data.type, the closest registered name and the list.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <functional>

#include "xtrain/base/error.h"
#include "xtrain/data/registry.h"

namespace xtrain::data::registry_test {
namespace {

// n samples of one value each: sample i is [i + offset].
class CountingDataset : public Dataset {
 public:
  CountingDataset(int64_t n, double offset) : n_(n), offset_(offset) {}
  int64_t size() const override { return n_; }
  Batch collate(const std::vector<int64_t>& indices) const override {
    at::Tensor x = at::empty({static_cast<int64_t>(indices.size()), 1});
    for (size_t r = 0; r < indices.size(); ++r) x[r][0] = indices[r] + offset_;
    return {x, at::zeros({static_cast<int64_t>(indices.size())}, at::kLong)};
  }
  DatasetInfo info() const override { return {"image", 0, 0, 2, {1}}; }

 private:
  int64_t n_;
  double offset_;
};

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

TEST(DatasetRegistry, BuiltinsAreEntriesWithTheirTasks) {
  const auto names = dataset_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3),
            (std::vector<std::string>{"text", "mnist", "fashion_mnist"}));
  EXPECT_EQ(find_dataset("text").task, "lm");
  EXPECT_EQ(find_dataset("mnist").task, "classify");
  EXPECT_EQ(find_dataset("fashion_mnist").task, "classify");
  EXPECT_NE(datasets_markdown().find("| `text` | lm |"), std::string::npos);
}

TEST(DatasetRegistry, OpenDatasetsAsksTheRegistryWithArgsAndSeqLen) {
  int64_t seen_seq_len = -1;
  std::string seen_cache;
  DatasetEntry e;
  e.description = "counting (test)";
  e.task = "classify";
  e.open = [&](const DataOptions& o, int64_t seq_len, const std::string& cache_dir) {
    seen_seq_len = seq_len;
    seen_cache = cache_dir;
    const int64_t n = o.args.at("n").get<int64_t>();
    return Splits{std::make_shared<CountingDataset>(n, 0.0), std::make_shared<CountingDataset>(n / 2, 100.0)};
  };
  e.validate = [](const DataOptions& o) {
    XTRAIN_USAGE_CHECK(o.args.contains("n") && o.args["n"].is_number_integer(),
                       "counting: xtrain.data.args.n must be an integer, got ", o.args.dump());
  };
  register_dataset("test_counting", e);
  DataOptions o;
  o.type = "test_counting";
  EXPECT_NE(usage_error([&] { check_data_options(o); }).find("xtrain.data.args.n must be an integer"), std::string::npos);
  o.args["n"] = 8;
  check_data_options(o);
  const Splits s = open_datasets(o, 33, "/some/cache");
  EXPECT_EQ(seen_seq_len, 33);
  EXPECT_EQ(seen_cache, "/some/cache");
  EXPECT_EQ(s.train->size(), 8);
  EXPECT_EQ(s.val->size(), 4);
  EXPECT_EQ(s.val->collate({3}).input.item<float>(), 103.0f);
}

TEST(DatasetRegistry, BadEntriesAreRefusedAndUnknownNamesSuggest) {
  DatasetEntry e;
  e.task = "classify";
  EXPECT_NE(usage_error([&] { register_dataset("no_open", e); }).find("needs an open function"), std::string::npos);
  e.open = [](const DataOptions&, int64_t, const std::string&) { return Splits{}; };
  e.task = "images";
  EXPECT_NE(usage_error([&] { register_dataset("bad_task", e); }).find("task must be \"lm\" or \"classify\""),
            std::string::npos);
  e.task = "classify";
  register_dataset("test_empty", e);
  DataOptions o;
  o.type = "test_empty";
  EXPECT_NE(usage_error([&] { open_datasets(o, 8, "."); }).find("opened no train or no val split"), std::string::npos);
  o.type = "minst";
  const std::string m = usage_error([&] { open_datasets(o, 8, "."); });
  EXPECT_NE(m.find("config: xtrain.data.type: unknown dataset \"minst\"; did you mean \"mnist\"? registered: text, "
                   "mnist, fashion_mnist"), std::string::npos) << m;
}

}  // namespace
}  // namespace xtrain::data::registry_test
