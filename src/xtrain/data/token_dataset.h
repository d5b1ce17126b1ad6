// Language-model windows over a folder of token shards (`xtrain.data.type: tokens`): sample i is
// a window of T + 1 tokens that lies inside one shard (input = its first T, target = its last T).
// Design choice: the corpus may be larger than memory, so nothing is O(corpus) but the shard list:
// tokens are read through mmap and the sampler draws window starts from a hash of (seed, epoch,
// draw) instead of materialising a permutation (nanoGPT's get_batch draws uniformly the same way).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "xtrain/data/dataset.h"
#include "xtrain/data/token_shards.h"

namespace xtrain::data {

class TokenDataset : public Dataset {
 public:
  // UsageError when no shard holds T + 1 tokens (`split` names the split in the message).
  TokenDataset(std::vector<std::shared_ptr<const TokenShard>> shards, int64_t vocab, int64_t seq_len,
               const std::string& split);
  // Every window start in every shard is a sample.
  int64_t size() const override { return starts_.back(); }
  // input and target int64 [B, T]; a token >= the vocabulary is a UsageError naming the shard.
  Batch collate(const std::vector<int64_t>& indices) const override;
  DatasetInfo info() const override;
  // RandomWindowSampler: an epoch is tokens / (T + 1) uniform draws, O(1) memory.
  std::unique_ptr<Sampler> make_sampler(uint64_t seed, int64_t rank, int64_t world_size) const override;
  int64_t tokens() const { return tokens_; }

 private:
  std::vector<std::shared_ptr<const TokenShard>> shards_;
  std::vector<int64_t> starts_;  // starts_[s]: first sample index of shard s; back() = size()
  int64_t vocab_, seq_len_, tokens_ = 0;
};

// Draws of uniform window starts in [0, size): draw g of epoch e is splitmix64 of (seed, e, g).
// Rank r of W takes draws r, r + W, …; the state (epoch, position) resumes exactly.
class RandomWindowSampler : public Sampler {
 public:
  RandomWindowSampler(int64_t size, int64_t draws_per_epoch, uint64_t seed, int64_t rank, int64_t world_size);
  std::vector<int64_t> next(int64_t count) override;
  SamplerState state() const override { return state_; }
  void set_state(const SamplerState& state) override;
  int64_t samples_per_epoch() const { return per_rank_; }

 private:
  int64_t size_, per_rank_;
  uint64_t seed_;
  int64_t rank_, world_;
  SamplerState state_;
};

// The `tokens` dataset: xtrain.data.path is a folder written by `xtrain data prepare` (manifest.json),
// llm.c's *train*.bin / *val*.bin shards, or nanoGPT's train.bin / val.bin (raw uint16).
Splits open_token_dataset(const DataOptions& options, int64_t seq_len, const std::string& cache_dir);
// xtrain.data.args of the tokens dataset: format (auto | llmc | nanogpt), vocab_size, and tokenizer
// (read by the run: run/run_tokenizer.h).
void validate_token_options(const DataOptions& options);

}  // namespace xtrain::data
