// Difficulty-ordered sampling after DELT (Dai et al., "Data Efficacy for Language Model Training",
// 2025): the scored samples are served easy-to-hard, optionally "folded" into several easy-to-hard
// passes, with a fraction of positions served uniformly at random. One choice: an epoch is still a
// permutation of the whole dataset, split across ranks exactly as DistributedSampler splits it
// (rank r of W takes global positions r, r+W, …), so ranks are disjoint and resume is (epoch,
// position). Scores come from difficulty_scorer.h.
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/data/difficulty_scorer.h"
#include "xtrain/data/options.h"
#include "xtrain/data/sampler.h"

namespace xtrain::data {

// UsageError naming the xtrain.data.ordering.* key for out-of-range values.
void validate_ordering(const DataOrderingOptions& options);

struct DifficultyOrder {
  std::vector<int64_t> order;     // a permutation of [0, n): the epoch's global order
  std::vector<uint8_t> from_mix;  // 1 where that position was served by the random mix
};

// The global order of one epoch, the same on every rank; a function of its arguments alone.
// Ordered epochs (epoch < ordering_epochs), with K scored samples and p = random_mix:
//  1. the scored samples are shuffled; the first round(p·K) join the random pool, the rest (the
//     ordered stream) are sorted by (score, index) and dealt round-robin into `folds` folds —
//     fold f holds sorted ranks f, f+L, f+2L, … — which are concatenated (each fold easy-to-hard);
//  2. the random pool (those plus every unscored sample) is shuffled;
//  3. each position draws u ~ U[0, 1): the pool serves it when u < p or the ordered stream is
//     exhausted (and the pool is not), the ordered stream otherwise.
// Later epochs: DistributedSampler's permutation for (seed, epoch), all marked from_mix.
DifficultyOrder difficulty_epoch_order(int64_t n, const DifficultyScores& scores, const DataOrderingOptions& options,
                                       uint64_t seed, int64_t epoch);

class DifficultySampler : public EpochSampler {
 public:
  // UsageError (validate_ordering) for bad options.
  DifficultySampler(int64_t dataset_size, DifficultyScores scores, const DataOrderingOptions& options, uint64_t seed,
                    int64_t rank = 0, int64_t world_size = 1);

 protected:
  std::vector<int64_t> epoch_order(int64_t epoch) const override;

 private:
  DifficultyScores scores_;
  DataOrderingOptions options_;
  uint64_t seed_;
};

}  // namespace xtrain::data
