// ZeRO stage 3: the parameters are partitioned too (shared/design/zero.md, "Stage 3 without module
// hooks"), assembled from parts: the units and their wrappers (stage3_units.h), the parameter store
// (param_store.h: shards, gather/release/prefetch, the NVMe parameter file), the sharded optimizer
// state (optimizer_state.h) and the unit reductions of the shared gradient path (grad_path.h).
// A unit's parameters are gathered before its forward and released after; gathered again when the
// gradient reaches its outputs and, when its backward is done, its gradients are reduce-scattered
// into the owners' shards (or all-reduced, with reduce_scatter false; in communication_data_type
// when set) and the parameters released. Parameters outside units, and small ones, stay whole on
// every rank ("persistent"), their gradients reduced after each backward. Master weights,
// optimizer state and reduced gradients are partitioned as in stage 2, so a rank holds 16Ψ/N bytes
// of model state (mixed-precision Adam) plus the persistent parameters and the units in flight.
//
// A unit's parameters must be used only inside its forward; after the strategy is destroyed the
// partitioned parameters stay empty (load a checkpoint, or call gathered_parameters() before).
#pragma once
#include <memory>

#include "xtrain/comm/communicator.h"
#include "xtrain/zero/grad_path.h"
#include "xtrain/zero/optimizer_state.h"
#include "xtrain/zero/param_store.h"
#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/shard_ops.h"
#include "xtrain/zero/stage3_units.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::zero {

class Stage3Strategy : public Strategy, public UnitEvents {
 public:
  Stage3Strategy(NamedParams params, std::shared_ptr<torch::nn::Module> module, const StrategyOptions& options,
                 std::shared_ptr<comm::Communicator> dp);
  ~Stage3Strategy() override;

  std::string describe() const override;
  const FlatLayout& layout() const override { return sl_.flat; }
  void before_backward(bool boundary) override;
  void after_backward(bool boundary) override;
  void reduce() override;
  double grad_norm_squared() override;
  void step(const StepHyper& hyper) override;
  void zero_grads() override;
  std::string optimizer_name() const override;
  int64_t optimizer_step_count() const override;
  void set_optimizer_step_count(int64_t n) override;
  void save(checkpoint::CheckpointWriter& writer) const override;
  void load(const checkpoint::CheckpointReader& reader, bool load_optimizer) override;
  MemoryReport memory() const override;
  NamedParams gathered_parameters() override;

  at::Tensor run_unit(size_t u, const UnitFn& inner, const at::Tensor& x) override;
  void on_pre_backward(size_t u) override;
  void on_post_backward(size_t u) override;

  size_t num_partitioned_units() const { return partitioned_; }
  int64_t partitioned_numel() const;  // parameters held as shards between uses
  int64_t peak_live_numel() const { return store_->peak_live_numel(); }  // most gathered at once so far
  int64_t gathers() const { return store_->gathers(); }                  // all-gathers issued so far

 private:
  void check_options() const;
  void setup_gradients();
  void reduce_unit(size_t u, at::Tensor staging);

  StrategyOptions options_;
  std::shared_ptr<comm::Communicator> dp_;
  std::vector<std::string> given_names_;
  NamedParams named_;  // in layout order: the partitioned units' parameters, then the persistent ones
  ShardLayout sl_;
  std::vector<WeightedRange> norm_ranges_;  // of part_grad_
  size_t partitioned_ = 0;  // units [0, partitioned_) are partitioned, the rest persistent
  int64_t rank_ = 0;
  ShardReduce reduce_;
  std::vector<optim::Segment> segments_;
  std::unique_ptr<ShardedOptimizerState> state_;
  std::unique_ptr<ParameterStore> store_;
  at::Tensor part_grad_;              // reduced gradients, shard buffer of reduce_.dtype
  std::vector<at::Tensor> staging_;   // per unit: its gradients on their way to the reducer
  std::vector<char> needs_reduce_;    // per unit: ran forward with grad; its gradients are not reduced yet
  std::unique_ptr<parallel::BucketReducer> reducer_;  // runs unit reductions; before part_grad_ goes
  std::shared_ptr<UnitEvents> events_;  // this, without ownership; wrappers and hooks hold it weakly
  std::unique_ptr<UnitWrappers> wrappers_;
};

}  // namespace xtrain::zero
