// TokenDataset, its O(1)-memory sampler, and the `tokens` opener: which files form the train and
// val splits (manifest.json first, then llm.c's or nanoGPT's file names) and the vocabulary.
#include "xtrain/data/token_dataset.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::data {
namespace fs = std::filesystem;

TokenDataset::TokenDataset(std::vector<std::shared_ptr<const TokenShard>> shards, int64_t vocab, int64_t seq_len,
                           const std::string& split)
    : shards_(std::move(shards)), vocab_(vocab), seq_len_(seq_len) {
  XTRAIN_USAGE_CHECK(seq_len > 0, "data: seq_len must be > 0, got ", seq_len, " (xtrain.model.seq_len)");
  starts_.push_back(0);
  std::string files;
  for (const auto& s : shards_) {
    starts_.push_back(starts_.back() + std::max<int64_t>(0, s->size() - seq_len));
    tokens_ += s->size();
    files += (files.empty() ? "" : ", ") + s->path();
  }
  XTRAIN_USAGE_CHECK(size() > 0, "data: the ", split, " split (", files.empty() ? "no shard files" : files, ") holds ",
                     tokens_, " tokens and no shard has seq_len + 1 = ", seq_len + 1,
                     " of them: an empty or too small corpus (add text, or lower xtrain.model.seq_len)");
}

Batch TokenDataset::collate(const std::vector<int64_t>& indices) const {
  const int64_t B = int64_t(indices.size()), T = seq_len_;
  at::Tensor both = at::empty({2, B, T}, at::kLong);
  int64_t* input = both.data_ptr<int64_t>();
  int64_t* target = input + B * T;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = indices[b];
    TORCH_CHECK(0 <= i && i < size(), "data: token sample index ", i, " out of range [0, ", size(), ")");
    const int64_t s = int64_t(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) - 1;
    const TokenShard& shard = *shards_[s];
    const int64_t begin = i - starts_[s];
    for (int64_t t = 0; t <= T; ++t) {
      const int64_t token = shard[begin + t];
      XTRAIN_USAGE_CHECK(token < vocab_, "data: ", shard.path(), " holds token ", token, " at position ",
                         begin + t, ", outside the vocabulary of ", vocab_,
                         " (the manifest's vocab_size, or xtrain.data.args.vocab_size for shards without one)");
      if (t < T) input[b * T + t] = token;
      if (t > 0) target[b * T + t - 1] = token;
    }
  }
  return Batch{both[0], both[1]};
}

DatasetInfo TokenDataset::info() const {
  DatasetInfo info;
  info.kind = "text";
  info.vocab = vocab_;
  info.seq_len = seq_len_;
  return info;
}

std::unique_ptr<Sampler> TokenDataset::make_sampler(uint64_t seed, int64_t rank, int64_t world_size) const {
  const int64_t draws = std::max<int64_t>(tokens_ / (seq_len_ + 1), world_size);
  return std::make_unique<RandomWindowSampler>(size(), draws, seed, rank, world_size);
}

RandomWindowSampler::RandomWindowSampler(int64_t size, int64_t draws_per_epoch, uint64_t seed, int64_t rank,
                                         int64_t world_size)
    : size_(size), per_rank_(draws_per_epoch / world_size), seed_(seed), rank_(rank), world_(world_size) {
  TORCH_CHECK(world_size > 0 && 0 <= rank && rank < world_size, "data: sampler rank ", rank, " outside a world of ",
              world_size);
  TORCH_CHECK(size > 0 && per_rank_ > 0, "data: a window sampler needs samples, got size ", size, " and ",
              draws_per_epoch, " draws per epoch");
}

std::vector<int64_t> RandomWindowSampler::next(int64_t count) {
  TORCH_CHECK(count >= 0, "data: sampler asked for ", count, " samples");
  std::vector<int64_t> out;
  out.reserve(size_t(count));
  while (int64_t(out.size()) < count) {
    const uint64_t base = epoch_seed(seed_, state_.epoch);
    const uint64_t draw = uint64_t(state_.position * world_ + rank_);  // the draw's index in the epoch
    SplitMix64 rng{base + draw * 0x9e3779b97f4a7c15ULL};
    out.push_back(int64_t(rng.below(uint64_t(size_))));
    if (++state_.position == per_rank_) {
      ++state_.epoch;
      state_.position = 0;
    }
  }
  return out;
}

void RandomWindowSampler::set_state(const SamplerState& state) {
  XTRAIN_USAGE_CHECK(state.epoch >= 0 && state.position >= 0 && state.position <= per_rank_,
                     "data: sampler state (epoch ", state.epoch, ", position ", state.position,
                     ") does not fit this dataset: each rank takes ", per_rank_,
                     " windows per epoch (was the checkpoint written for another dataset or world size?)");
  state_ = state;
  if (state_.position == per_rank_) {
    ++state_.epoch;
    state_.position = 0;
  }
}

}  // namespace xtrain::data
