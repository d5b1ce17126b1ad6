// Difficulty scores for DifficultySampler: a scorer gives a random subset of the training samples
// one number each (higher = harder), computed once per run and cached in the run directory.
// `entropy` needs only the data; `loss` calls back into the trainer, so data/ never includes
// models/ or engine/ (DELT's "learnability-quality" scorer is a reference model's loss as well).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/data/dataset.h"

namespace xtrain::data {

struct DifficultyScores {
  std::vector<int64_t> indices;  // ascending, distinct, in [0, dataset size)
  std::vector<float> values;     // values[i] is the difficulty of sample indices[i]
};

// The loss scorer's callback: one difficulty per index (the trainer's reference model in eval mode).
using SampleScoreFn = std::function<std::vector<float>(const std::vector<int64_t>& indices)>;

// Unigram Shannon entropy of n tokens in bits: −Σ_c (n_c/n)·log2(n_c/n); 0 for n = 0. A constant
// window scores 0, a window using 2^k symbols equally often scores k.
double unigram_entropy_bits(const int64_t* tokens, int64_t n);

// The scored subset: min(k, n) distinct indices of [0, n) drawn from `seed`, ascending.
std::vector<int64_t> score_subset(int64_t n, int64_t k, uint64_t seed);

// Unigram entropy of each sample's input window (text datasets: int64 tokens [B, T]).
std::vector<float> entropy_scores(const Dataset& dataset, const std::vector<int64_t>& indices);

struct ScoringRequest {
  std::string scorer = "entropy";  // entropy | loss
  int64_t samples = 0;             // the subset size (resolved score_samples, > 0)
  uint64_t seed = 0;
  SampleScoreFn loss;              // scorer = loss
  std::string reference;           // scorer = loss: what `loss` evaluates (part of the cache key)
  int64_t batch_size = 32;         // indices per callback call
  std::string cache_path;          // "" = do not cache
  bool write_cache = true;         // false on ranks other than the lead
};

// The subset's scores: read from cache_path when it holds scores for the same scorer, dataset
// size, window length, subset and reference; otherwise computed (and written there atomically).
DifficultyScores compute_scores(const Dataset& dataset, const ScoringRequest& request);

}  // namespace xtrain::data
