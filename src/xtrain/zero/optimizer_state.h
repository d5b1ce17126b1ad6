// ShardedOptimizerState: this rank's shard of the fp32 master weights and the optimizer state, for
// ZeRO stages 1-3, in memory or on NVMe (offload/nvme_optimizer.h) behind one interface: initialise,
// step over the shard's segments, hand the buffers to a checkpoint and take them back, count bytes.
// The strategies never ask where the state lives; make_optimizer_state() decides once, from
// zero_optimization.offload_optimizer.device.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/optim/optimizer.h"
#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::zero {

class ShardedOptimizerState {
 public:
  virtual ~ShardedOptimizerState() = default;

  // Elements [local, local + values.numel()) of the fp32 master shard; the moments start at zero.
  virtual void initialize(int64_t local, const at::Tensor& values) = 0;

  // (offset into the shard, updated fp32 master values): every element once, in order; the tensor
  // is valid during the call only.
  using UpdatedSink = std::function<void(int64_t local, const at::Tensor& master)>;
  // One optimizer step of the shard with the reduced gradients `grads` (the shard's size).
  virtual void step(const at::Tensor& grads, const std::vector<optim::Segment>& segments, const StepHyper& hyper,
                    const UpdatedSink& updated) = 0;

  // "master", then each optimizer state with `with_optimizer`: whole shards, for save_shards() and
  // load_shards(). After filling them for a load, pass them to store().
  virtual NamedBuffers buffers(bool with_optimizer) const = 0;
  virtual void store(const NamedBuffers& buffers) = 0;

  virtual std::string optimizer_name() const = 0;
  virtual int64_t step_count() const = 0;
  virtual void set_step_count(int64_t n) = 0;

  // master_bytes, optimizer_bytes and disk_bytes of `report` (added to).
  virtual void account(MemoryReport& report) const = 0;
  virtual std::string describe() const = 0;  // "; ..." for the strategy's describe(), or ""
  // The fp32 master shard when it is resident in memory; undefined otherwise.
  virtual at::Tensor resident_master() const { return {}; }
};

// A checkpoint (any stage, any world size) into this rank's shard of `state` (the master, and the
// optimizer state with `load_optimizer`); returns the model's saved weights by parameter name.
std::map<std::string, at::Tensor> load_state(const checkpoint::CheckpointReader& reader, bool load_optimizer,
                                             const ShardLayout& layout, int64_t rank, const StrategyOptions& options,
                                             ShardedOptimizerState& state);

// save_shards() of the master and the optimizer state; state that is not per-element fp32 (8-bit
// Adam) is saved whole per rank instead (whole_state_io.h), and load_state() reads it back so.
void save_state(checkpoint::CheckpointWriter& writer, const ShardLayout& layout, int64_t rank, int64_t stage,
                const ShardedOptimizerState& state);

std::unique_ptr<ShardedOptimizerState> make_optimizer_state(const StrategyOptions& options, int64_t rank,
                                                            int64_t shard_numel);

}  // namespace xtrain::zero
