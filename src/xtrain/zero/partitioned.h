// ZeRO stages 1 and 2: every rank keeps the full model parameters (the model's dtype) but only its
// shard of the fp32 master weights and optimizer state (shard_layout.h). Stage 1: gradients go to
// a full buffer and are reduce-scattered at the accumulation boundary, in place (the whole model is
// one unit, so a rank's reduced shard is a contiguous slice of that buffer). Stage 2: each bucket's
// gradients are copied, as autograd produces them, into a staging buffer that is reduce-scattered
// asynchronously (overlapped with the rest of backward, every micro-batch, as DeepSpeed does) and
// added to this rank's shard; the parameters' .grad are released at once, so no full gradient
// exists. After the step each rank's updated shard is all-gathered into every rank's parameters
// (in allgather_bucket_size pieces, or with allgather_partitions false one broadcast per rank).
// Gradients go through zero/grad_reduce.h: reduce-scatter or all-reduce, in communication_data_type.
// offload_optimizer.device "nvme": the master shard and the moments live in a file
// (offload/nvme_optimizer.h), stepped chunk by chunk; checkpoints are the same as in memory.
#pragma once
#include <deque>
#include <memory>
#include <mutex>

#include "xtrain/comm/communicator.h"
#include "xtrain/zero/grad_reduce.h"
#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/shard_layout.h"
#include "xtrain/zero/shard_ops.h"
#include "xtrain/zero/strategy.h"

namespace torch::autograd {
struct Node;
}

namespace xtrain::zero {

class NvmeOptimizerState;

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

  void on_grad(int slot);  // slot's gradient is final for this backward (stage 2; stage 1 when checking)

 private:
  struct InFlight {
    size_t unit;
    UnitReduction reduction;
  };
  void setup_gradients();
  void write_own(int64_t local, const at::Tensor& values);
  void gather_params();         // every rank's updated shards into every rank's parameters
  void check_unused_params();   // ignore_unused_parameters: false
  NamedBuffers state_buffers(bool with_optimizer) const;
  void launch_ready();  // caller holds mutex_
  void launch(size_t unit);
  void drain(size_t keep);

  StrategyOptions options_;
  std::shared_ptr<comm::Communicator> dp_;
  NamedParams named_;
  ShardLayout sl_;
  std::vector<WeightedRange> norm_ranges_;  // of part_grad_
  int64_t rank_ = 0;
  at::ScalarType reduce_dtype_ = at::kFloat;  // gradients are summed and accumulated in this dtype
  UnitReduceOptions reduce_options_;          // reduce-scatter or all-reduce, wire dtype, pre/post scaling
  double post_after_ = 1.0;                   // the post-scale still due at reduce()
  std::vector<char> used_;                    // per slot: got a gradient this step (ignore_unused_parameters)
  at::Tensor model_params_;  // full buffer, the model's dtype; the parameters are views of it
  at::Tensor master_;        // fp32 shard buffer (undefined with NVMe offload)
  at::Tensor grads_;         // stage 1: the parameters' .grad (full, model dtype)
  at::Tensor grad_acc_;      // stage 1 mixed precision: full buffer of reduce_dtype_
  at::Tensor part_grad_;     // this rank's reduced gradients (shard buffer of reduce_dtype_)
  std::vector<optim::Segment> segments_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // null with NVMe offload
  std::unique_ptr<NvmeOptimizerState> nvme_;     // offload_optimizer.device "nvme"
  // Stage 2: units launch in reverse layout order (autograd's order), each once all its slots
  // have their gradient; the same sequence on every rank.
  std::mutex mutex_;
  std::vector<at::Tensor> staging_;
  std::vector<int> pending_;
  std::vector<char> ready_;
  size_t launched_ = 0;
  std::deque<InFlight> inflight_;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
};

}  // namespace xtrain::zero
