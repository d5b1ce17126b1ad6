// xtrain.data.ordering keys as the config reader sees them: defaults, values, and typos or bad
// choices rejected with the key's full path and a suggestion.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"

namespace xtrain::config::data_ordering_keys_test {
namespace {

std::string usage_error(const std::string& text) {
  try {
    load_text(text, LoadOptions{});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(DataOrderingKeys, DefaultsAndValues) {
  const auto d = load_text("{}", LoadOptions{}).config.data.ordering;
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.scorer, "entropy");
  EXPECT_EQ(d.score_samples, 0);
  EXPECT_DOUBLE_EQ(d.random_mix, 0.1);
  EXPECT_EQ(d.folds, 1);
  EXPECT_EQ(d.ordering_epochs, 1);
  const auto o = load_text(R"({"xtrain": {"data": {"ordering": {"enabled": true, "scorer": "loss",
      "reference_checkpoint": "runs/ref", "score_samples": 5000, "random_mix": 0.25, "folds": 3}}}})",
                           LoadOptions{})
                     .config.data.ordering;
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.scorer, "loss");
  EXPECT_EQ(o.reference_checkpoint, "runs/ref");
  EXPECT_EQ(o.score_samples, 5000);
  EXPECT_DOUBLE_EQ(o.random_mix, 0.25);
  EXPECT_EQ(o.folds, 3);
}

TEST(DataOrderingKeys, TyposAndBadChoicesNameTheKey) {
  std::string e = usage_error(R"({"xtrain": {"data": {"ordering": {"random_mx": 0.2}}}})");
  EXPECT_NE(e.find("xtrain.data.ordering.random_mix"), std::string::npos) << e;
  e = usage_error(R"({"xtrain": {"data": {"ordering": {"scorer": "lenght"}}}})");
  EXPECT_NE(e.find("xtrain.data.ordering.scorer must be one of \"entropy\", \"loss\""), std::string::npos) << e;
  e = usage_error(R"({"xtrain": {"data": {"ordering": {"folds": "three"}}}})");
  EXPECT_NE(e.find("xtrain.data.ordering.folds"), std::string::npos) << e;
}

}  // namespace
}  // namespace xtrain::config::data_ordering_keys_test
