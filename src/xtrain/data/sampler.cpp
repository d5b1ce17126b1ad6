// DistributedSampler: splitmix64 (splitmix64.h) drives a Fisher–Yates shuffle, so an epoch's order
// is a function of (seed, epoch) alone — the same on every platform and LibTorch version, and
// reproducible in ten lines of Python.
#include "xtrain/data/sampler.h"

#include <c10/util/Exception.h>

#include <numeric>

#include "xtrain/base/error.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::data {

EpochSampler::EpochSampler(int64_t dataset_size, int64_t rank, int64_t world_size)
    : size_(dataset_size), rank_(rank), world_(world_size) {
  TORCH_CHECK(world_size > 0 && 0 <= rank && rank < world_size, "data: sampler rank ", rank,
              " outside a world of ", world_size);
  XTRAIN_USAGE_CHECK(dataset_size >= world_size, "data: the dataset has ", dataset_size,
                     " samples, fewer than the ", world_size, " data-parallel ranks that share it");
}

int64_t EpochSampler::samples_per_epoch() const { return size_ / world_; }

void EpochSampler::build_epoch() {
  // The full global order is needed to take this rank's share; it is rebuilt once per epoch.
  const std::vector<int64_t> global = epoch_order(state_.epoch);
  TORCH_INTERNAL_ASSERT(int64_t(global.size()) == size_);
  const int64_t per_rank = samples_per_epoch();
  order_.resize(per_rank);
  for (int64_t k = 0; k < per_rank; ++k) order_[k] = global[rank_ + k * world_];
  built_epoch_ = state_.epoch;
}

std::vector<int64_t> EpochSampler::next(int64_t count) {
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

void EpochSampler::set_state(const SamplerState& state) {
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

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), int64_t(0));
  SplitMix64 rng{epoch_seed(seed, epoch)};
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(uint64_t(i) + 1)]);
  return perm;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, uint64_t seed, int64_t rank, int64_t world_size,
                                       bool shuffle)
    : EpochSampler(dataset_size, rank, world_size), seed_(seed), shuffle_(shuffle) {}

std::vector<int64_t> DistributedSampler::epoch_order(int64_t epoch) const {
  if (shuffle_) return shuffled_order(size_, seed_, epoch);
  std::vector<int64_t> identity(size_);
  std::iota(identity.begin(), identity.end(), int64_t(0));
  return identity;
}

}  // namespace xtrain::data
