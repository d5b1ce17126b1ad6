// The search space: parsing with errors that name the parameter, the unit-cube encoding (log
// scale, int rounding, one-hot choices) against hand-computed values, and sampling distributions.
#include "xtrain/tune/space.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/errors.h"
#include "xtrain/base/error.h"

namespace xtrain::tune::space_test {
namespace {

const char* kSpace = R"({
  // comments are allowed, as in ds_config.json
  "optimizer.params.lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
  "scheduler.params.warmup_num_steps": {"type": "int", "low": 0, "high": 200},
  "xtrain.model.layers": {"type": "int", "low": 1, "high": 16, "log": true},
  "optimizer.type": {"type": "choice", "values": ["AdamW", "Lamb", "SGD"]},
  "xtrain.model.dropout": {"type": "uniform", "low": 0.0, "high": 0.2}
})";

// Equal parameters, floats to 1e-12 relative (decode(encode(v)) goes through exp/log).
void expect_same_params(const Params& a, const Params& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, value] : b.items()) {
    ASSERT_TRUE(a.contains(key)) << key;
    if (value.is_number_float()) {
      EXPECT_NEAR(a[key].get<double>(), value.get<double>(), 1e-12 * std::abs(value.get<double>())) << key;
    } else {
      EXPECT_EQ(a[key], value) << key;
    }
  }
}

std::string error_of(const std::string& text) {
  return xtrain::testing::usage_error([&] { SearchSpace::parse(text, "space.json"); });
}

TEST(SearchSpace, ParsesInFileOrderWithOneHotBlocks) {
  const auto s = SearchSpace::parse(kSpace);
  ASSERT_EQ(s.params().size(), 5u);
  EXPECT_EQ(s.params()[0].key, "optimizer.params.lr");
  EXPECT_EQ(s.params()[3].key, "optimizer.type");
  EXPECT_EQ(s.params()[3].offset, 3);
  EXPECT_EQ(s.params()[4].offset, 6);
  EXPECT_EQ(s.dims(), 7);
  EXPECT_EQ(s.continuous_mask(), (std::vector<bool>{true, true, true, false, false, false, true}));
  // The canonical JSON parses back to the same space.
  EXPECT_EQ(SearchSpace::parse(s.to_json().dump()).to_json(), s.to_json());
}

TEST(SearchSpace, EncodesOnTheDeclaredScale) {
  const auto s = SearchSpace::parse(kSpace);
  Params p = {{"optimizer.params.lr", 1e-3},              // geometric middle of [1e-4, 1e-2]
              {"scheduler.params.warmup_num_steps", 50},  // 50/200
              {"xtrain.model.layers", 4},                 // log 4 / log 16
              {"optimizer.type", "SGD"},
              {"xtrain.model.dropout", 0.05}};
  const auto x = s.encode(p);
  const std::vector<double> expected = {0.5, 0.25, 0.5, 0, 0, 1, 0.25};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], expected[i], 1e-15) << "coordinate " << i;
  expect_same_params(s.decode(x), p);
  // Decoding snaps: ints round (on their scale), the largest one-hot entry wins, clamps to bounds.
  const auto d = s.decode({1.3, 0.2526, 0.26, 0.2, 0.7, 0.1, -0.5});
  EXPECT_DOUBLE_EQ(d["optimizer.params.lr"].get<double>(), 1e-2);
  EXPECT_EQ(d["scheduler.params.warmup_num_steps"], 51);  // 0.2526 * 200 = 50.52
  EXPECT_EQ(d["xtrain.model.layers"], 2);                 // 16^0.26 = 2.06
  EXPECT_EQ(d["optimizer.type"], "Lamb");
  EXPECT_EQ(d["xtrain.model.dropout"], 0.0);
  EXPECT_EQ(s.overrides(p),
            (std::vector<std::string>{"optimizer.params.lr=0.001", "scheduler.params.warmup_num_steps=50",
                                      "xtrain.model.layers=4", "optimizer.type=\"SGD\"", "xtrain.model.dropout=0.05"}));
}

TEST(SearchSpace, SamplesEveryValueWithTheRightDensity) {
  const auto s = SearchSpace::parse(R"({"a": {"type": "int", "low": 0, "high": 4},
    "b": {"type": "loguniform", "low": 1e-4, "high": 1e-2}, "c": {"type": "choice", "values": [1, 2]}})");
  Rng rng(7);
  std::vector<int> ints(5, 0);
  int below_geometric_mean = 0, first_choice = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const auto p = s.sample(rng);
    ++ints[p["a"].get<int>()];
    below_geometric_mean += p["b"].get<double>() < 1e-3;
    first_choice += p["c"] == 1;
    if (i < 200) expect_same_params(s.decode(s.encode(p)), p);
  }
  // Binomial counts with p = 1/5 and 1/2 over 20000 draws: 5 standard deviations ≈ 0.015 and 0.018.
  for (int v = 0; v < 5; ++v) EXPECT_NEAR(ints[v] / double(n), 0.2, 0.015) << "int value " << v;
  EXPECT_NEAR(below_geometric_mean / double(n), 0.5, 0.018);
  EXPECT_NEAR(first_choice / double(n), 0.5, 0.018);
}

TEST(SearchSpace, ErrorsNameTheParameterAndSuggest) {
  EXPECT_NE(error_of(R"({"lr": {"type": "logunifrom", "low": 1, "high": 2}})").find("did you mean 'loguniform'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"lr": {"type": "uniform", "low": 1, "hgih": 2}})").find("needs \"high\""), std::string::npos);
  EXPECT_NE(error_of(R"({"lr": {"type": "uniform", "low": 1, "high": 2, "hgih": 2}})").find("did you mean 'high'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"lr": {"type": "uniform", "low": 2, "high": 1}})").find("low < high, got low 2, high 1"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"lr": {"type": "loguniform", "low": 0, "high": 1}})").find("needs low > 0"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"n": {"type": "int", "low": 0.5, "high": 3}})").find("integer bounds"), std::string::npos);
  EXPECT_NE(error_of(R"({"o": {"type": "choice", "values": []}})").find("non-empty \"values\""), std::string::npos);
  EXPECT_NE(error_of(R"({"a..b": {"type": "uniform", "low": 0, "high": 1}})").find("not a config key path"),
            std::string::npos);
  EXPECT_NE(error_of("{}").find("non-empty object"), std::string::npos);
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  const auto e = error_of(R"({"optimizer.params.lr": {"type": "uniform", "low": "a", "high": 1}})");
  EXPECT_NE(e.find("space.json: \"optimizer.params.lr\".low must be a number"), std::string::npos) << e;
}

}  // namespace
}  // namespace xtrain::tune::space_test
