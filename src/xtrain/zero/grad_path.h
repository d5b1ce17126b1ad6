// How gradients reach this rank's shard of reduced gradients (`part_grad`) in ZeRO stages 1-3, on
// one parallel::BucketReducer each (the same bucket machinery stage 0 all-reduces with):
// - stage 1 (BoundaryGradients): the parameters' .grad are views of a full buffer, reduced in place
//   at the accumulation boundary as one bucket (the rank's slice of it is part_grad);
// - stage 2 (BucketedGradients): each unit's gradients are copied into a staging buffer as autograd
//   produces them and the unit is reduced (unit_collective) every backward, overlapped;
// - stage 3 launches its units itself when their backward is done (stage3.h), also unit_collective.
// Unit reductions go through zero/grad_reduce.h (reduce-scatter or all-reduce, communication_data_type).
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "xtrain/parallel/data/bucket_reducer.h"
#include "xtrain/zero/grad_reduce.h"
#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::zero {

// Gradients are summed and accumulated in `dtype`; `options` reduce one unit; `post_after` is the
// scale reduce() still applies.
struct ShardReduce {
  at::ScalarType dtype = at::kFloat;
  UnitReduceOptions options;
  double post_after = 1.0;
};
ShardReduce shard_reduce(const StrategyOptions& options, const comm::Communicator& dp);

// Bucket b reduces unit unit_of(b): its staging buffer (zeros when no gradient arrived) is reduced
// and this rank's slice added into part_grad; the staging buffer is released at launch. `staging`
// and `part_grad` must outlive the reducer the collective runs in.
parallel::BucketCollective unit_collective(comm::Communicator& dp, const ShardLayout& layout, const ShardReduce& reduce,
                                           std::vector<at::Tensor>& staging, const at::Tensor& part_grad,
                                           std::function<size_t(int)> unit_of);

// Moves parameter i's .grad into its unit's staging buffer (zeros of `dtype` on first use) and
// releases it; false when it has none.
bool stage_gradient(const ShardLayout& layout, int i, const at::Tensor& param, std::vector<at::Tensor>& staging,
                    at::ScalarType dtype);

// The gradient part of a stage 1/2 strategy.
class ShardGradients {
 public:
  ShardGradients(const NamedParams& named, const ShardLayout& layout, const StrategyOptions& options,
                 std::shared_ptr<comm::Communicator> dp);
  virtual ~ShardGradients() = default;
  virtual std::string what() const = 0;  // what is partitioned, for describe()
  virtual void before_backward() = 0;
  virtual void after_backward() = 0;
  // At the boundary: part_grad() becomes this rank's share of the mean over ranks.
  void reduce();
  // The unreduced gradient buffers of one slot; empty when gradients are reduced during backward.
  virtual std::vector<at::Tensor> unreduced(const ParamSlot& slot) const { return {}; }
  virtual void zero();
  virtual int64_t bytes() const = 0;
  const at::Tensor& part_grad() const { return part_grad_; }

 protected:
  virtual void reduce_buckets() = 0;
  bool note_used(int i);  // parameter i's hook: whether it has a gradient (recorded for the unused check)
  void check_unused();    // zero_optimization.ignore_unused_parameters false

  const NamedParams& named_;
  const ShardLayout& layout_;
  const StrategyOptions& options_;
  std::shared_ptr<comm::Communicator> dp_;
  ShardReduce reduce_;
  std::vector<char> used_;
  at::Tensor part_grad_;
};

// Stage 1 when `stage` is 1, else stage 2.
std::unique_ptr<ShardGradients> make_shard_gradients(const NamedParams& named, const ShardLayout& layout,
                                                     const StrategyOptions& options,
                                                     std::shared_ptr<comm::Communicator> dp);

}  // namespace xtrain::zero
