// Architecture search spaces: conditional parameters ("when"), int steps and "$constraints".
// Over many samples of configs/nas_space_gpt.json and of GP-EI proposals, no trial gets an invalid
// combination (each checked by the rule itself: d_model % heads, heads >= windows, the step grid)
// or a key whose condition does not hold, and the GP sees one vector per configuration (inactive
// coordinates 0, encode(decode(x)) = x). Errors name the offending key or value.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/tune/sampler.h"
#include "xtrain/tune/space.h"

namespace xtrain::tune::nas_space_test {
namespace {

const std::string kType = "xtrain.model.attention.type", kWindows = "xtrain.model.attention.windows";

SearchSpace nas_space() { return SearchSpace::load(testing::source_dir() + "/configs/nas_space_gpt.json"); }

// The model's own rules (models/gpt.cpp check_options, ms_attention check_windows), written out.
void expect_valid_architecture(const Params& p) {
  const int64_t heads = p.at("xtrain.model.heads").get<int64_t>(), d = p.at("xtrain.model.d_model").get<int64_t>();
  EXPECT_EQ(d % heads, 0) << p.dump();
  EXPECT_EQ((d - 64) % 16, 0) << p.dump();
  EXPECT_GE(d, 64);
  EXPECT_LE(d, 320);
  EXPECT_EQ(p.at("xtrain.model.seq_len").get<int64_t>() % 64, 0) << p.dump();
  const bool multiscale = p.at(kType) == "multiscale";
  ASSERT_EQ(p.contains(kWindows), multiscale) << "windows set exactly when multi-scale: " << p.dump();
  if (multiscale) {
    EXPECT_LE(static_cast<int64_t>(p.at(kWindows).size()), heads) << p.dump();
  }
  EXPECT_EQ(p.size(), multiscale ? 7u : 6u) << p.dump();
}

TEST(NasSpace, RandomSamplesAreValidAndEncodeConsistently) {
  const auto s = nas_space();
  ASSERT_EQ(s.constraints().size(), 2u);
  Rng rng(11);
  std::set<int64_t> heads_seen;
  int multiscale = 0, three_windows = 0;
  for (int i = 0; i < 3000; ++i) {
    const auto p = s.sample(rng);
    expect_valid_architecture(p);
    const auto x = s.encode(p);
    EXPECT_EQ(s.decode(x), p);
    EXPECT_EQ(s.snap(x), x);
    if (!p.contains(kWindows)) {  // inactive: its one-hot block is all zeros (a fixed point)
      const auto& w = s.params()[6];
      for (int64_t c = 0; c < w.width(); ++c) EXPECT_EQ(x[w.offset + c], 0.0);
    }
    heads_seen.insert(p.at("xtrain.model.heads").get<int64_t>());
    multiscale += p.at(kType) == "multiscale";
    three_windows += p.contains(kWindows) && p.at(kWindows).size() == 3;
  }
  EXPECT_EQ(heads_seen.size(), 5u) << "the constraints leave every heads value some d_model";
  EXPECT_GT(multiscale, 1000);
  EXPECT_GT(three_windows, 200);
}

TEST(NasSpace, ConfigsDifferingOnlyInAnInactiveKeyAreOnePoint) {
  const auto s = nas_space();
  Params a = {{"xtrain.model.layers", 2},         {"xtrain.model.heads", 4},     {"xtrain.model.d_model", 128},
              {"xtrain.model.args.mlp_ratio", 4}, {"xtrain.model.seq_len", 128}, {kType, "dense"}};
  Params b = a;
  b[kWindows] = {16, 64};  // set, but inactive under dense attention
  EXPECT_EQ(s.encode(a), s.encode(b));
  EXPECT_EQ(s.decode(s.encode(b)), a) << "decoding drops the inactive key";
  EXPECT_EQ(s.overrides(a).size(), 6u);
  b[kType] = "multiscale";
  EXPECT_NE(s.encode(a), s.encode(b));
  EXPECT_EQ(s.overrides(b).back(), kWindows + "=[16,64]");
}

TEST(NasSpace, GpProposalsAreValid) {
  const auto s = nas_space();
  GpSamplerOptions go;
  go.initial_random = 6;
  go.candidates = 300;
  go.local_candidates = 100;
  go.local_starts = 2;
  GpSampler gp(s, go);
  std::vector<Observation> done;
  for (int64_t i = 0; i < 12; ++i) {
    Rng rng(3, static_cast<uint64_t>(i));
    const auto x = gp.propose(done, {}, rng);
    ASSERT_EQ(s.snap(x), x) << "trial " << i;
    const auto p = s.decode(x);
    expect_valid_architecture(p);
    // A smooth objective of the architecture: the GP must model it through the inactive block.
    const double d = p.at("xtrain.model.d_model").get<double>(), layers = p.at("xtrain.model.layers").get<double>();
    done.push_back({x, std::pow(std::log(d / 192), 2) + 0.1 * std::abs(layers - 3) + (p.contains(kWindows) ? 0 : 0.2)});
  }
  EXPECT_FALSE(gp.last_theta().empty()) << "the last proposals came from the GP";
}

TEST(NasSpace, StepsSnapToTheirGrid) {
  const auto s = SearchSpace::parse(R"({"n": {"type": "int", "low": 64, "high": 320, "step": 32}})");
  EXPECT_EQ(s.decode({0.0})["n"], 64);
  EXPECT_EQ(s.decode({0.06})["n"], 64);  // 64 + 0.06 * 256 = 79.4 -> 64
  EXPECT_EQ(s.decode({0.07})["n"], 96);  // 81.9 -> 96
  EXPECT_EQ(s.decode({1.0})["n"], 320);
  EXPECT_EQ(SearchSpace::parse(s.to_json().dump()).to_json(), s.to_json());
  Rng rng(2);
  std::set<int64_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(s.sample(rng)["n"].get<int64_t>());
  EXPECT_EQ(seen, (std::set<int64_t>{64, 96, 128, 160, 192, 224, 256, 288, 320}));
}

TEST(NasSpace, CanonicalJsonKeepsConditionsAndConstraints) {
  const auto s = nas_space();
  const auto j = s.to_json();
  EXPECT_EQ(j[kWindows]["when"][kType], "multiscale");
  EXPECT_EQ(j["$constraints"][0].dump(), R"(["xtrain.model.d_model","multiple_of","xtrain.model.heads"])");
  EXPECT_EQ(SearchSpace::parse(j.dump()).to_json(), j);
}

std::string error_of(const std::string& text) {
  return xtrain::testing::usage_error([&] { SearchSpace::parse(text, "space.json"); });
}

TEST(NasSpace, BadConditionsAndConstraintsAreErrorsNamingThem) {
  const std::string att = R"("xtrain.model.attention.type": {"type": "choice", "values": ["dense", "multiscale"]}, )";
  auto e =
      error_of("{" + att +
               R"("w": {"type": "int", "low": 1, "high": 4, "when": {"xtrain.model.attention.typo": "multiscale"}}})");
  EXPECT_NE(e.find("\"xtrain.model.attention.typo\", which is not a parameter declared before it"), std::string::npos)
      << e;
  EXPECT_NE(e.find("did you mean 'xtrain.model.attention.type'"), std::string::npos) << e;
  e = error_of("{" + att +
               R"("w": {"type": "int", "low": 1, "high": 4, "when": {"xtrain.model.attention.type": "multiscal"}}})");
  EXPECT_NE(e.find("never takes \"multiscal\" (its values: [\"dense\",\"multiscale\"])"), std::string::npos) << e;
  e = error_of(
      R"({"a": {"type": "int", "low": 1, "high": 4}, "b": {"type": "int", "low": 1, "high": 4, "when": {"a": 2}}})");
  EXPECT_NE(e.find("\"a\", which is not a choice parameter"), std::string::npos) << e;
  e = error_of(
      R"({"b": {"type": "int", "low": 1, "high": 4, "when": {"a": 2}}, "a": {"type": "choice", "values": [2]}})");
  EXPECT_NE(e.find("not a parameter declared before it"), std::string::npos) << e;
  e = error_of(R"({"a": {"type": "int", "low": 1, "high": 4}, "$constraints": [["a", "multiple_of", "b"]]})");
  EXPECT_NE(e.find("$constraints[0]: \"b\" is not a parameter of the space"), std::string::npos) << e;
  e = error_of(R"({"a": {"type": "int", "low": 1, "high": 4}, "$constraints": [["a", "=<", 3]]})");
  EXPECT_NE(e.find("unknown relation \"=<\""), std::string::npos) << e;
  e = error_of(R"({"a": {"type": "int", "low": 1, "high": 4, "step": 2}})");
  EXPECT_NE(e.find("must be a multiple of step (2)"), std::string::npos) << e;
  // A space whose constraints no point meets fails when sampled, naming them.
  const auto s = SearchSpace::parse(R"({"a": {"type": "int", "low": 1, "high": 4}, "$constraints": [["a", ">", 9]]})");
  Rng rng(1);
  try {
    s.sample(rng);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& err) {
    EXPECT_NE(std::string(err.what()).find("a > 9"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace xtrain::tune::nas_space_test
