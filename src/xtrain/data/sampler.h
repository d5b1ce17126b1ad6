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

// What the Loader draws from: a resumable stream of sample indices for one rank.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // The next `count` indices for this rank (crossing into the next epoch when needed).
  virtual std::vector<int64_t> next(int64_t count) = 0;
  virtual SamplerState state() const = 0;
  virtual void set_state(const SamplerState& state) = 0;
};

// A sampler whose epoch is one global permutation of [0, size), split across ranks as above.
class EpochSampler : public Sampler {
 public:
  std::vector<int64_t> next(int64_t count) override;
  SamplerState state() const override { return state_; }
  void set_state(const SamplerState& state) override;
  int64_t samples_per_epoch() const;  // per rank

 protected:
  EpochSampler(int64_t dataset_size, int64_t rank, int64_t world_size);
  // The global order of `epoch`: a permutation of [0, size), the same on every rank.
  virtual std::vector<int64_t> epoch_order(int64_t epoch) const = 0;
  int64_t size_;

 private:
  void build_epoch();
  int64_t rank_, world_;
  SamplerState state_;
  std::vector<int64_t> order_;  // this rank's indices for state_.epoch
  int64_t built_epoch_ = -1;
};

// The permutation of [0, n) for (seed, epoch): splitmix64 + Fisher–Yates.
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

class DistributedSampler : public EpochSampler {
 public:
  DistributedSampler(int64_t dataset_size, uint64_t seed, int64_t rank = 0, int64_t world_size = 1,
                     bool shuffle = true);

 protected:
  std::vector<int64_t> epoch_order(int64_t epoch) const override;

 private:
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace xtrain::data
