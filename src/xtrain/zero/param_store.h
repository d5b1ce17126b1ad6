// Stage 3's parameters: units [0, partitioned) exist between uses only as this rank's shard, in
// memory (the fp32 master itself in fp32 training) or in a file (offload_param.device nvme, read on
// gather); a unit is all-gathered into a full buffer its parameters point at (set_data) for its
// forward and backward, prefetched ahead within stage3_prefetch_bucket_size and never above
// stage3_max_live_parameters, and released after. The other units ("persistent") stay whole on
// every rank, refreshed from the owners' shards after each step.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "xtrain/comm/communicator.h"
#include "xtrain/zero/optimizer_state.h"
#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::zero {

class UringFile;

class ParameterStore {
 public:
  // `named` in layout order (the strategy's; it must outlive the store). `master`: the optimizer
  // state's resident fp32 master, which in fp32 training is the shard itself (undefined: none).
  ParameterStore(NamedParams& named, const ShardLayout& layout, size_t partitioned, const StrategyOptions& options,
                 comm::Communicator& dp, const at::Tensor& master);
  ~ParameterStore();
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // Rank 0's initial values, one unit at a time (each unit's full values are dropped as soon as this
  // rank's shard is taken, so the transient is one unit, not a second copy of the model): the shard
  // into `state` and into this store, persistent units whole; partitioned parameters released.
  void initialize(ShardedOptimizerState& state);

  void gather(size_t u);  // waits; u's parameters are views of the full buffer after it
  void release(size_t u);
  // Gathers of the units after `from` in call order (direction +1 forward, -1 backward).
  void prefetch(size_t from, int direction);

  at::Tensor shard_of(size_t u) const;  // this rank's shard of unit u, the model's dtype
  // Updated fp32 master values at `local` into the shard (nothing when the shard is the master).
  void update(int64_t local, const at::Tensor& master);
  void refresh_persistent();        // after a step: the owners' shards into every rank's whole copy
  void load(const at::Tensor& flat);  // the model's values as a full flat buffer of the model's dtype

  at::Tensor persistent_grad(size_t u) const;  // unit u's (persistent) .grad buffer
  void zero_persistent_grads();

  int64_t param_bytes() const;  // resident: the shard (unless it is the master) and the persistent units
  int64_t disk_bytes() const;
  int64_t grad_bytes() const;
  int64_t peak_live_numel() const { return peak_live_; }
  int64_t gathers() const { return gathers_; }

 private:
  struct UnitState {
    at::Tensor full;  // gathered buffer (the model's dtype); undefined when released
    comm::Work work;  // gather in flight
    bool in_flight = false;
  };
  void open_param_file();
  void bind_persistent_grads();
  void write_shard(int64_t local, const at::Tensor& values);
  void start_gather(size_t u);
  int64_t file_bytes() const;

  NamedParams& named_;
  const ShardLayout& sl_;
  size_t partitioned_;
  const StrategyOptions& options_;
  comm::Communicator& dp_;
  at::ScalarType dtype_;
  bool shard_is_master_ = false;
  at::Tensor param_shard_;     // this rank's shard (undefined with the parameter file)
  at::Tensor persist_;         // persistent parameters, whole (the model's dtype)
  at::Tensor persist_grads_;   // their .grad, whole
  int64_t persist_begin_ = 0;  // flat offset of the first persistent unit
  at::Tensor released_;        // what a released parameter holds: an empty tensor of the model's dtype
  std::vector<UnitState> units_;
  int64_t live_ = 0, peak_live_ = 0, gathers_ = 0;
  std::unique_ptr<UringFile> param_file_;  // offload_param.device nvme: the shard, on disk
};

}  // namespace xtrain::zero
