// Difficulty-ordered sampling: the epoch order against brute-force sorts of the scores (plain and
// folded), the random mix against binomial bounds, ranks disjoint and covering, exact resume, the
// entropy scorer against closed forms on crafted windows, the score cache, and option errors that
// name the key.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>

#include "xtrain/base/error.h"
#include "xtrain/data/difficulty_sampler.h"
#include "xtrain/data/loader.h"

namespace xtrain::data::difficulty_sampler_test {
namespace {

// Text windows given as strings: input = the window's bytes, target = input (unused here).
class WindowsDataset : public Dataset {
 public:
  explicit WindowsDataset(std::vector<std::string> windows) : windows_(std::move(windows)) {}
  int64_t size() const override { return int64_t(windows_.size()); }
  Batch collate(const std::vector<int64_t>& indices) const override {
    const int64_t T = int64_t(windows_.at(0).size());
    at::Tensor input = at::empty({int64_t(indices.size()), T}, at::kLong);
    for (size_t b = 0; b < indices.size(); ++b) {
      for (int64_t t = 0; t < T; ++t) input[b][t] = int64_t(uint8_t(windows_.at(indices[b])[t]));
    }
    return {input, input.clone()};
  }
  DatasetInfo info() const override { return {"text", 256, int64_t(windows_.at(0).size()), 0, {}}; }

 private:
  std::vector<std::string> windows_;
};

DifficultyScores random_scores(const std::vector<int64_t>& indices, uint32_t seed, int distinct = 1 << 20) {
  std::mt19937 gen(seed);  // independent of the sampler's splitmix64
  std::uniform_int_distribution<int> d(0, distinct - 1);
  DifficultyScores s{indices, {}};
  for (size_t i = 0; i < indices.size(); ++i) s.values.push_back(float(d(gen)));
  return s;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t(0));
  return v;
}

// Brute force: indices sorted by (score, index).
std::vector<int64_t> sorted_by_score(const DifficultyScores& s) {
  std::vector<std::pair<float, int64_t>> p;
  for (size_t i = 0; i < s.indices.size(); ++i) p.emplace_back(s.values[i], s.indices[i]);
  std::sort(p.begin(), p.end());
  std::vector<int64_t> out;
  for (const auto& [v, i] : p) out.push_back(i);
  return out;
}

DataOrderingOptions options(double mix, int64_t folds = 1) {
  DataOrderingOptions o;
  o.enabled = true;
  o.random_mix = mix;
  o.folds = folds;
  return o;
}

TEST(DifficultySampler, WithoutMixTheEpochIsTheScoreSortThenTheUnscored) {
  const int64_t n = 500;
  // Few distinct values: ties are broken by index.
  const auto scores = random_scores(score_subset(n, 300, 7), 1, 40);
  const auto got = difficulty_epoch_order(n, scores, options(0.0), 11, 0);
  const auto want = sorted_by_score(scores);
  ASSERT_EQ(got.order.size(), size_t(n));
  EXPECT_EQ(std::vector<int64_t>(got.order.begin(), got.order.begin() + 300), want);
  std::set<int64_t> scored(scores.indices.begin(), scores.indices.end()), rest;
  for (int64_t i = 300; i < n; ++i) rest.insert(got.order[i]);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(rest.count(i), scored.count(i) ? 0u : 1u) << i;
}

TEST(DifficultySampler, FoldsAreRoundRobinDealsOfTheSortedOrder) {
  const int64_t n = 301, L = 4;
  const auto scores = random_scores(iota(n), 2);
  const auto got = difficulty_epoch_order(n, scores, options(0.0, L), 5, 0).order;
  const auto sorted = sorted_by_score(scores);
  std::vector<int64_t> want;
  for (int64_t f = 0; f < L; ++f) {
    for (int64_t i = f; i < n; i += L) want.push_back(sorted[i]);
  }
  EXPECT_EQ(got, want);
}

TEST(DifficultySampler, OrderedPositionsAreNonDecreasingAndTheMixIsBinomial) {
  const int64_t n = 20000;
  const double p = 0.2;
  const auto scores = random_scores(iota(n), 3);
  std::vector<float> score_of(n);
  for (int64_t i = 0; i < n; ++i) score_of[scores.indices[i]] = scores.values[i];
  const auto got = difficulty_epoch_order(n, scores, options(p), 9, 0);
  // The ordered stream holds n - round(p n) samples: the first M positions never exhaust it.
  const int64_t M = 10000;
  int64_t mixed = 0;
  float last = -1;
  for (int64_t g = 0; g < M; ++g) {
    if (got.from_mix[g]) {
      ++mixed;
    } else {
      ASSERT_GE(score_of[got.order[g]], last) << "position " << g;
      last = score_of[got.order[g]];
    }
  }
  const double sd = std::sqrt(M * p * (1 - p));
  EXPECT_NEAR(double(mixed), M * p, 5 * sd);  // 5 sigma: a false failure has probability ~6e-7
  std::vector<int64_t> sorted_order = got.order;
  std::sort(sorted_order.begin(), sorted_order.end());
  EXPECT_EQ(sorted_order, iota(n));  // a permutation
}

TEST(DifficultySampler, UnscoredSamplesArriveAtTheMixRate) {
  // Without looking at from_mix: K scored of n; the pool holds the n - K unscored and round(pK)
  // scored samples, shuffled, so an unscored sample serves a position with probability
  // q = p (n - K) / (n - K + pK) while the ordered stream lasts.
  const int64_t n = 30000, K = 20000, L = 10000;
  const double p = 0.3;
  const auto scores = random_scores(score_subset(n, K, 4), 5);
  const std::set<int64_t> scored(scores.indices.begin(), scores.indices.end());
  const auto order = difficulty_epoch_order(n, scores, options(p), 13, 0).order;
  int64_t unscored = 0;
  for (int64_t g = 0; g < L; ++g) unscored += scored.count(order[g]) ? 0 : 1;
  const double q = p * (n - K) / (n - K + p * K);
  EXPECT_NEAR(double(unscored), L * q, 5 * std::sqrt(L * q * (1 - q)));  // 5 sigma, as above
}

TEST(DifficultySampler, RanksAreDisjointAndTakeStridedPositionsOfTheGlobalOrder) {
  const int64_t n = 1000, W = 3;
  const auto scores = random_scores(score_subset(n, 600, 1), 6);
  const auto o = options(0.25, 2);
  const auto global = difficulty_epoch_order(n, scores, o, 21, 0).order;
  std::set<int64_t> seen;
  for (int64_t r = 0; r < W; ++r) {
    DifficultySampler s(n, scores, o, 21, r, W);
    ASSERT_EQ(s.samples_per_epoch(), n / W);
    const auto mine = s.next(n / W);
    for (int64_t k = 0; k < n / W; ++k) {
      ASSERT_EQ(mine[k], global[r + k * W]) << "rank " << r << " sample " << k;
      EXPECT_TRUE(seen.insert(mine[k]).second) << "sample " << mine[k] << " served twice";
    }
  }
  EXPECT_EQ(int64_t(seen.size()), n / W * W);  // all but the dropped tail
}

TEST(DifficultySampler, ResumeContinuesExactlyAndLaterEpochsAreUniformShuffles) {
  const int64_t n = 700;
  const auto scores = random_scores(iota(n), 8);
  const auto o = options(0.1, 3);  // ordering_epochs = 1
  DifficultySampler a(n, scores, o, 77, 1, 2);
  a.next(123);
  const SamplerState mid = a.state();
  const auto rest = a.next(600);  // crosses into epoch 1
  DifficultySampler b(n, scores, o, 77, 1, 2);
  b.set_state(mid);
  EXPECT_EQ(b.next(600), rest);
  // Epoch 1 is DistributedSampler's epoch 1 for the same seed.
  DistributedSampler plain(n, 77, 1, 2);
  plain.set_state({1, 0});
  DifficultySampler c(n, scores, o, 77, 1, 2);
  c.set_state({1, 0});
  EXPECT_EQ(c.next(350), plain.next(350));
  EXPECT_THROW(c.set_state({0, 351}), UsageError);
}

TEST(DifficultySampler, TheSeedDecidesTheMix) {
  const int64_t n = 400;
  const auto scores = random_scores(iota(n), 9);
  EXPECT_EQ(difficulty_epoch_order(n, scores, options(0.5), 1, 0).order,
            difficulty_epoch_order(n, scores, options(0.5), 1, 0).order);
  EXPECT_NE(difficulty_epoch_order(n, scores, options(0.5), 1, 0).order,
            difficulty_epoch_order(n, scores, options(0.5), 2, 0).order);
}

TEST(DifficultySampler, EntropyScorerMatchesClosedForms) {
  // T = 12 byte windows with known symbol counts.
  const std::vector<std::string> windows = {
      "aaaaaaaaaaaa",  // one symbol: 0 bits
      "abababababab",  // two symbols, equal: 1 bit
      "abcdabcdabcd",  // four symbols, equal: 2 bits
      "aaabaaabaaab",  // 9:3: H(1/4) = 2 - (3/4) log2 3
      "aabbbbcccccc",  // 2:4:6 = 1/6, 1/3, 1/2
      "the whale!!!",  // t ' ' w a l: 1 each; h e: 2 each; !: 3
  };
  const double h6 = -(5 * (1.0 / 12) * std::log2(1.0 / 12) + 2 * (2.0 / 12) * std::log2(2.0 / 12) +
                      (3.0 / 12) * std::log2(3.0 / 12));
  const std::vector<double> want = {0.0,
                                    1.0,
                                    2.0,
                                    2.0 - 0.75 * std::log2(3.0),
                                    (1.0 / 6) * std::log2(6.0) + (1.0 / 3) * std::log2(3.0) + 0.5,
                                    h6};
  WindowsDataset ds(windows);
  const auto got = entropy_scores(ds, iota(int64_t(windows.size())));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6) << windows[i];  // float32 scores: ~1e-7 relative
  }
}

TEST(DifficultySampler, ScoreSubsetIsDistinctSortedAndBounded) {
  const auto s = score_subset(1000, 100, 3);
  ASSERT_EQ(s.size(), 100u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), 100u);
  EXPECT_GE(s.front(), 0);
  EXPECT_LT(s.back(), 1000);
  EXPECT_EQ(score_subset(10, 50, 3), iota(10));
  EXPECT_NE(score_subset(1000, 100, 4), s);
}

TEST(DifficultySampler, ScoresAreCachedPerKey) {
  const auto dir = std::filesystem::temp_directory_path() / ("xtrain_scores_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::string> windows;
  for (int i = 0; i < 50; ++i) windows.push_back(std::string(4, char('a' + i % 26)));
  WindowsDataset ds(windows);
  int calls = 0;
  ScoringRequest r;
  r.scorer = "loss";
  r.samples = 20;
  r.seed = 5;
  r.batch_size = 8;
  r.reference = "ref";
  r.cache_path = (dir / "scores.bin").string();
  r.loss = [&](const std::vector<int64_t>& idx) {
    ++calls;
    std::vector<float> v;
    for (int64_t i : idx) v.push_back(0.5f * float(i));
    return v;
  };
  const auto first = compute_scores(ds, r);
  EXPECT_EQ(calls, 3);  // ceil(20 / 8)
  EXPECT_EQ(first.indices, score_subset(50, 20, 5));
  for (size_t i = 0; i < first.indices.size(); ++i) EXPECT_EQ(first.values[i], 0.5f * float(first.indices[i]));
  const auto again = compute_scores(ds, r);
  EXPECT_EQ(calls, 3);  // read from the cache
  EXPECT_EQ(again.indices, first.indices);
  EXPECT_EQ(again.values, first.values);
  r.reference = "another";
  compute_scores(ds, r);
  EXPECT_EQ(calls, 6);  // another key: scored again
  std::filesystem::remove_all(dir);
}

std::string error_of(const DataOrderingOptions& o) {
  try {
    validate_ordering(o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(DifficultySampler, BadOptionsNameTheKey) {
  auto o = options(1.5);
  EXPECT_NE(error_of(o).find("xtrain.data.ordering.random_mix must be in [0, 1], got 1.5"), std::string::npos)
      << error_of(o);
  o = options(0.1, 0);
  EXPECT_NE(error_of(o).find("xtrain.data.ordering.folds must be >= 1, got 0"), std::string::npos) << error_of(o);
  o = options(0.1);
  o.scorer = "loss";
  EXPECT_NE(error_of(o).find("xtrain.data.ordering.reference_checkpoint"), std::string::npos) << error_of(o);
  o = options(0.1);
  o.score_samples = -3;
  EXPECT_NE(error_of(o).find("xtrain.data.ordering.score_samples must be >= 0"), std::string::npos) << error_of(o);
  EXPECT_THROW(DifficultySampler(10, {}, options(-0.1), 1), UsageError);
}

TEST(DifficultySampler, LoaderServesItsOrder) {
  std::vector<std::string> windows;
  for (int i = 0; i < 40; ++i) windows.push_back(std::string(3, char(i)));  // token value = index
  auto ds = std::make_shared<WindowsDataset>(windows);
  const auto scores = random_scores(iota(40), 10);
  const auto o = options(0.0);
  Loader loader(ds, std::make_unique<DifficultySampler>(40, scores, o, 3), 4, 2);
  const auto want = difficulty_epoch_order(40, scores, o, 3, 0).order;
  for (int b = 0; b < 5; ++b) {
    const auto batch = loader.next();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(batch.input[i][0].item<int64_t>(), want[b * 4 + i]);
  }
  EXPECT_EQ(loader.state().position, 20);
}

}  // namespace
}  // namespace xtrain::data::difficulty_sampler_test
