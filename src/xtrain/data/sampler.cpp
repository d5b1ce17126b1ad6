// DistributedSampler: splitmix64 (Steele et al., "Fast splittable pseudorandom number generators",
// 2014) drives a Fisher–Yates shuffle, so an epoch's order is a function of (seed, epoch) alone —
// the same on every platform and LibTorch version, and reproducible in ten lines of Python.
#include "xtrain/data/sampler.h"

#include <c10/util/Exception.h>

#include <numeric>

#include "xtrain/base/error.h"

namespace xtrain::data {
namespace {

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias: reject the first 2^64 mod n values.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t x = next();
      if (x >= threshold) return x % n;
    }
  }
};

// The stream for one epoch: seeded with a splitmix64 hash of (seed, epoch).
uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  SplitMix64 mix{seed};
  const uint64_t a = mix.next();
  SplitMix64 mix_epoch{a ^ uint64_t(epoch)};
  return mix_epoch.next();
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, uint64_t seed, int64_t rank, int64_t world_size,
                                       bool shuffle)
    : size_(dataset_size), seed_(seed), rank_(rank), world_(world_size), shuffle_(shuffle) {
  TORCH_CHECK(world_size > 0 && 0 <= rank && rank < world_size, "data: sampler rank ", rank,
              " outside a world of ", world_size);
  XTRAIN_USAGE_CHECK(dataset_size >= world_size, "data: the dataset has ", dataset_size,
                     " samples, fewer than the ", world_size, " data-parallel ranks that share it");
}

int64_t DistributedSampler::samples_per_epoch() const { return size_ / world_; }

void DistributedSampler::build_epoch() {
  // The full permutation is needed to take this rank's share; it is rebuilt once per epoch.
  std::vector<int64_t> perm(size_);
  std::iota(perm.begin(), perm.end(), int64_t(0));
  if (shuffle_) {
    SplitMix64 rng{epoch_seed(seed_, state_.epoch)};
    for (int64_t i = size_ - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(uint64_t(i) + 1)]);
  }
  const int64_t per_rank = samples_per_epoch();
  order_.resize(per_rank);
  for (int64_t k = 0; k < per_rank; ++k) order_[k] = perm[rank_ + k * world_];
  built_epoch_ = state_.epoch;
}

std::vector<int64_t> DistributedSampler::next(int64_t count) {
  TORCH_CHECK(count >= 0, "data: sampler asked for ", count, " samples");
  std::vector<int64_t> out;
  out.reserve(count);
  const int64_t per_rank = samples_per_epoch();
  while (int64_t(out.size()) < count) {
    if (built_epoch_ != state_.epoch) build_epoch();
    const int64_t take = std::min(count - int64_t(out.size()), per_rank - state_.position);
    out.insert(out.end(), order_.begin() + state_.position, order_.begin() + state_.position + take);
    state_.position += take;
    if (state_.position == per_rank) {  // the state always names a sample that exists
      ++state_.epoch;
      state_.position = 0;
    }
  }
  return out;
}

void DistributedSampler::set_state(const SamplerState& state) {
  XTRAIN_USAGE_CHECK(state.epoch >= 0 && state.position >= 0 && state.position <= samples_per_epoch(),
                     "data: sampler state (epoch ", state.epoch, ", position ", state.position,
                     ") does not fit this dataset: each rank takes ", samples_per_epoch(),
                     " samples per epoch (was the checkpoint written for another dataset or world size?)");
  state_ = state;
  if (state_.position == samples_per_epoch()) {
    ++state_.epoch;
    state_.position = 0;
  }
}

}  // namespace xtrain::data
