// Deterministic, resumable, distributed sampler: epoch e's order is a permutation drawn from
// (seed, e); rank r of W takes positions r, r+W, r+2W, … of it (the tail that does not divide
// evenly is dropped so every rank sees the same number of samples). The state is (epoch, position):
// restoring it continues exactly where the run stopped.
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::data {

struct SamplerState {
  int64_t epoch = 0;
  int64_t position = 0;  // samples this rank has taken in the current epoch
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, uint64_t seed, int64_t rank = 0, int64_t world_size = 1,
                     bool shuffle = true);
  // The next `count` indices for this rank (crossing into the next epoch when needed).
  std::vector<int64_t> next(int64_t count);
  SamplerState state() const { return state_; }
  void set_state(const SamplerState& state);
  int64_t samples_per_epoch() const;  // per rank

 private:
  void build_epoch();
  int64_t size_;
  uint64_t seed_;
  int64_t rank_, world_;
  bool shuffle_;
  SamplerState state_;
  std::vector<int64_t> order_;  // this rank's indices for state_.epoch
  int64_t built_epoch_ = -1;
};

}  // namespace xtrain::data
