// ZeRO stages 1 and 2: every rank keeps the full model parameters (the model's dtype) but only its
// shard of the fp32 master weights and optimizer state (shard_layout.h). Assembled from two parts:
// the gradient path (grad_path.h: stage 1 reduces one full buffer at the boundary, stage 2 reduces
// units during backward) and the sharded optimizer state (optimizer_state.h: in memory or on
// NVMe). After the step each rank's updated shard is all-gathered into every rank's parameters (in
// allgather_bucket_size pieces, or with allgather_partitions false one broadcast per rank).
#pragma once
#include <memory>

#include "xtrain/comm/communicator.h"
#include "xtrain/zero/grad_path.h"
#include "xtrain/zero/optimizer_state.h"
#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/shard_ops.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::zero {

class PartitionedStrategy : public Strategy {
 public:
  PartitionedStrategy(NamedParams params, const StrategyOptions& options, std::shared_ptr<comm::Communicator> dp);
  ~PartitionedStrategy() override;

  std::string describe() const override;
  const FlatLayout& layout() const override { return sl_.flat; }
  const ShardLayout& shard_layout() const { return sl_; }
  void before_backward(bool boundary) override;
  void after_backward(bool boundary) override;
  void reduce() override;
  double grad_norm_squared() override;
  std::vector<at::Tensor> unreduced_gradient(const std::string& name) override;
  void step(const StepHyper& hyper) override;
  void zero_grads() override;
  std::string optimizer_name() const override;
  int64_t optimizer_step_count() const override;
  void set_optimizer_step_count(int64_t n) override;
  void save(checkpoint::CheckpointWriter& writer) const override;
  void load(const checkpoint::CheckpointReader& reader, bool load_optimizer) override;
  MemoryReport memory() const override;

 private:
  void initialize_state();      // rank 0's initial values: this rank's master shard and every parameter
  void write_own(int64_t local, const at::Tensor& values);
  void gather_params();         // every rank's updated shards into every rank's parameters

  StrategyOptions options_;
  std::shared_ptr<comm::Communicator> dp_;
  NamedParams named_;
  ShardLayout sl_;
  std::vector<WeightedRange> norm_ranges_;  // of the reduced gradient shard
  int64_t rank_ = 0;
  at::Tensor model_params_;  // full buffer, the model's dtype; the parameters are views of it
  std::vector<optim::Segment> segments_;
  std::unique_ptr<ShardedOptimizerState> state_;
  std::unique_ptr<ShardGradients> grads_;  // after the parameters it hooks: destroyed first
};

}  // namespace xtrain::zero
