// ZeRO stage 3: the parameters are partitioned too (shared/design/zero.md, "Stage 3 without module
// hooks"). The model's parameters are grouped into units: the submodules its forward calls through
// nn::UnitRouted (GPT's blocks) and the children of every torch::nn::Sequential (wrapped in place).
// A unit's parameters with more than stage3_param_persistence_threshold elements exist between
// uses only as each rank's shard: all-gathered before the unit's forward (the next units prefetched
// up to stage3_prefetch_bucket_size elements, never more than stage3_max_live_parameters gathered),
// released after it; gathered again when the gradient reaches the unit's outputs (PreBackward, an
// identity autograd function on them) and, when the unit's backward is done (PostBackward, on its
// input), its gradients are reduce-scattered into the owners' shards and the parameters released.
// Parameters outside units, and small ones, stay whole on every rank ("persistent"), their
// gradients reduce-scattered after each backward (zero/grad_reduce.h: or all-reduced, with
// reduce_scatter false; in communication_data_type when set). Master weights, optimizer state and reduced
// gradients are partitioned as in stage 2, so a rank holds 16Ψ/N bytes of model state
// (mixed-precision Adam) plus the persistent parameters and the units in flight.
//
// A unit's parameters must be used only inside its forward; after the strategy is destroyed the
// partitioned parameters stay empty (load a checkpoint, or call gathered_parameters() before).
#pragma once
#include <deque>
#include <functional>
#include <memory>

#include "xtrain/comm/communicator.h"
#include "xtrain/zero/grad_reduce.h"
#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/shard_ops.h"
#include "xtrain/zero/strategy.h"

namespace torch::nn {
class AnyModule;
}

namespace xtrain::zero {

class NvmeOptimizerState;
class UringFile;

class Stage3Strategy : public Strategy {
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

  // Unit u's forward: `inner` runs with u's parameters gathered (the unit wrappers call this).
  at::Tensor run_unit(size_t u, const std::function<at::Tensor(const at::Tensor&)>& inner, const at::Tensor& x);
  void on_pre_backward(size_t u);   // the gradient reached unit u's outputs
  void on_post_backward(size_t u);  // unit u's backward is done

  size_t num_partitioned_units() const { return partitioned_; }
  int64_t partitioned_numel() const;  // parameters held as shards between uses
  int64_t peak_live_numel() const { return peak_live_; }  // most gathered at once so far
  int64_t gathers() const { return gathers_; }            // all-gathers issued so far

 private:
  struct UnitState {
    at::Tensor full;  // gathered buffer (the model's dtype); undefined when released
    comm::Work work;  // gather in flight
    bool in_flight = false;
    bool needs_reduce = false;  // ran forward with grad; its gradients are not reduced yet
  };
  struct InFlight {
    size_t unit;
    UnitReduction reduction;
  };
  at::Tensor shard_of(size_t u) const;                     // this rank's shard of unit u, the model's dtype
  void write_shard(int64_t local, const at::Tensor& values);  // into the shard buffer (or file) at `local`
  int64_t param_file_bytes() const;
  void start_gather(size_t u);
  void gather(size_t u);  // waits; u's parameters are views of the full buffer after it
  void release(size_t u);
  void prefetch(size_t from, int direction);
  void reduce_unit(size_t u, at::Tensor staging);
  void drain(size_t keep);
  void install_wrappers(const std::shared_ptr<torch::nn::Module>& module);

  StrategyOptions options_;
  std::shared_ptr<comm::Communicator> dp_;
  std::vector<std::string> given_names_;
  NamedParams named_;  // in layout order: the partitioned units' parameters, then the persistent ones
  ShardLayout sl_;
  std::vector<WeightedRange> norm_ranges_;  // of part_grad_
  size_t partitioned_ = 0;  // units [0, partitioned_) are partitioned, the rest persistent
  int64_t rank_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  at::ScalarType reduce_dtype_ = at::kFloat;
  UnitReduceOptions reduce_options_;  // reduce-scatter or all-reduce, wire dtype, pre/post scaling
  double post_after_ = 1.0;           // the post-scale still due at reduce()
  at::Tensor master_;         // fp32 shard buffer (undefined with nvme offload)
  at::Tensor param_shard_;    // this rank's shard in the model's dtype (master_ itself in fp32;
                              // undefined when the parameters are offloaded to NVMe)
  at::Tensor part_grad_;      // reduced gradients, shard buffer of reduce_dtype_
  at::Tensor persist_;        // persistent parameters, whole (the model's dtype)
  at::Tensor persist_grads_;  // their .grad, whole
  int64_t persist_begin_ = 0;  // flat offset of the first persistent unit
  at::Tensor released_;        // what a released parameter holds: an empty tensor of the model's dtype
  std::vector<UnitState> units_;
  std::deque<InFlight> inflight_;
  int64_t live_ = 0, peak_live_ = 0, gathers_ = 0;
  std::vector<optim::Segment> segments_;
  std::unique_ptr<optim::Optimizer> optimizer_;   // unless offload_optimizer.device is nvme
  std::unique_ptr<NvmeOptimizerState> nvme_;      // when it is
  std::unique_ptr<UringFile> param_file_;         // offload_param.device nvme: the shard, on disk
  // Wrappers hold this; cleared in the destructor so a wrapper outliving the strategy passes through.
  std::shared_ptr<Stage3Strategy*> self_;
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, std::vector<torch::nn::AnyModule>>> wrapped_sequentials_;
};

}  // namespace xtrain::zero
