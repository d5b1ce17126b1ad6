// DifficultySampler: the epoch's global order (O(n + K log K)) from the same splitmix64 streams as
// DistributedSampler; EpochSampler keeps this rank's share and the resumable (epoch, position).
#include "xtrain/data/difficulty_sampler.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "xtrain/base/error.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::data {
namespace {

template <class T>
void shuffle(std::vector<T>& v, SplitMix64& rng) {
  for (int64_t i = int64_t(v.size()) - 1; i > 0; --i) std::swap(v[i], v[rng.below(uint64_t(i) + 1)]);
}

// Step 1: the ordered stream (sorted, folded) and the scored samples given to the random pool.
void split_scored(const DifficultyScores& scores, const DataOrderingOptions& o, SplitMix64& rng,
                  std::vector<int64_t>& ordered, std::vector<int64_t>& pool) {
  const int64_t K = int64_t(scores.indices.size());
  std::vector<int64_t> pos(K);  // positions into scores
  std::iota(pos.begin(), pos.end(), int64_t(0));
  shuffle(pos, rng);
  const int64_t mixed = std::llround(o.random_mix * double(K));
  for (int64_t i = 0; i < mixed; ++i) pool.push_back(scores.indices[pos[i]]);
  pos.erase(pos.begin(), pos.begin() + mixed);
  std::sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) {
    return scores.values[a] != scores.values[b] ? scores.values[a] < scores.values[b]
                                                : scores.indices[a] < scores.indices[b];
  });
  for (int64_t f = 0; f < o.folds; ++f) {
    for (size_t i = size_t(f); i < pos.size(); i += size_t(o.folds)) ordered.push_back(scores.indices[pos[i]]);
  }
}

}  // namespace

void validate_ordering(const DataOrderingOptions& o) {
  if (!o.enabled) return;
  XTRAIN_USAGE_CHECK(o.random_mix >= 0.0 && o.random_mix <= 1.0,
                     "data: xtrain.data.ordering.random_mix must be in [0, 1], got ", o.random_mix);
  XTRAIN_USAGE_CHECK(o.folds >= 1, "data: xtrain.data.ordering.folds must be >= 1, got ", o.folds);
  XTRAIN_USAGE_CHECK(o.ordering_epochs >= 0, "data: xtrain.data.ordering.ordering_epochs must be >= 0, got ",
                     o.ordering_epochs);
  XTRAIN_USAGE_CHECK(o.score_samples >= 0, "data: xtrain.data.ordering.score_samples must be >= 0 (0: derived), got ",
                     o.score_samples);
  XTRAIN_USAGE_CHECK(o.scorer != "loss" || !o.reference_checkpoint.empty(),
                     "data: xtrain.data.ordering.scorer=loss needs xtrain.data.ordering.reference_checkpoint "
                     "(a run directory with checkpoints), got \"\"");
  XTRAIN_USAGE_CHECK(o.scorer == "loss" || o.reference_checkpoint.empty(),
                     "data: xtrain.data.ordering.reference_checkpoint (\"", o.reference_checkpoint,
                     "\") is only read by scorer=loss, but xtrain.data.ordering.scorer is \"", o.scorer, "\"");
}

DifficultyOrder difficulty_epoch_order(int64_t n, const DifficultyScores& scores, const DataOrderingOptions& o,
                                       uint64_t seed, int64_t epoch) {
  TORCH_CHECK(scores.indices.size() == scores.values.size() && int64_t(scores.indices.size()) <= n,
              "data: ", scores.values.size(), " difficulty scores for ", scores.indices.size(), " of ", n, " samples");
  DifficultyOrder out;
  if (epoch >= o.ordering_epochs) {  // plain shuffle: DistributedSampler's permutation of this epoch
    out.order = shuffled_order(n, seed, epoch);
    out.from_mix.assign(size_t(n), 1);
    return out;
  }
  SplitMix64 rng{epoch_seed(seed, epoch)};
  std::vector<int64_t> ordered, pool;
  split_scored(scores, o, rng, ordered, pool);
  std::vector<uint8_t> scored(size_t(n), 0);
  for (int64_t i : scores.indices) {
    TORCH_CHECK(0 <= i && i < n && !scored[i], "data: difficulty scores index ", i, " twice or outside [0, ", n, ")");
    scored[i] = 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!scored[i]) pool.push_back(i);
  }
  shuffle(pool, rng);
  out.order.reserve(n);
  out.from_mix.reserve(n);
  size_t next_ordered = 0, next_pool = 0;
  for (int64_t g = 0; g < n; ++g) {
    const double u = rng.uniform();  // drawn at every position, so the stream never depends on exhaustion
    const bool mix = next_ordered == ordered.size() || (next_pool < pool.size() && u < o.random_mix);
    out.order.push_back(mix ? pool[next_pool++] : ordered[next_ordered++]);
    out.from_mix.push_back(mix ? 1 : 0);
  }
  return out;
}

DifficultySampler::DifficultySampler(int64_t dataset_size, DifficultyScores scores, const DataOrderingOptions& options,
                                     uint64_t seed, int64_t rank, int64_t world_size)
    : EpochSampler(dataset_size, rank, world_size), scores_(std::move(scores)), options_(options), seed_(seed) {
  validate_ordering(options_);
}

std::vector<int64_t> DifficultySampler::epoch_order(int64_t epoch) const {
  return difficulty_epoch_order(size_, scores_, options_, seed_, epoch).order;
}

}  // namespace xtrain::data
