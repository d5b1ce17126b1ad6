// ZeRO stage 0: every data-parallel rank holds the whole model state. Parameters are views into one
// flat buffer of the model's dtype; the optimizer updates an fp32 master (the same buffer in fp32
// training); gradients are averaged over ranks by a BucketReducer launched from autograd hooks.
// With mixed precision the low-precision gradients are added into an fp32 buffer (per micro-batch
// with accumulation; per bucket just before it is sent), so accumulation and communication happen
// in fp32 unless communication_data_type says otherwise (each bucket is then cast for its sum).
#pragma once
#include <memory>

#include "xtrain/zero/shard_ops.h"
#include "xtrain/zero/strategy.h"

namespace xtrain::parallel {
class BucketReducer;
}

namespace xtrain::zero {

class ReplicatedStrategy : public Strategy {
 public:
  ReplicatedStrategy(NamedParams params, const StrategyOptions& options, std::shared_ptr<comm::Communicator> dp);
  ~ReplicatedStrategy() override;

  std::string describe() const override;
  const FlatLayout& layout() const override { return layout_; }
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
  void allocate(const NamedParams& params);
  const at::Tensor& reduced_grads() const;
  at::Tensor whole_layout() const;  // of 8-bit optimizer state in checkpoints (whole_state_io.h)

  StrategyOptions options_;
  std::shared_ptr<comm::Communicator> dp_;
  NamedParams named_;
  FlatLayout layout_;
  std::vector<WeightedRange> norm_ranges_;
  at::Tensor master_;    // fp32, updated by the optimizer
  at::Tensor model_params_;  // the model's parameters (== master_ in fp32 training)
  at::Tensor grads_;     // the model's .grad views
  at::Tensor grad_acc_;  // fp32 accumulation/communication buffer (mixed precision with GAS > 1 or dp > 1)
  std::vector<optim::Segment> segments_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<parallel::BucketReducer> reducer_;
};

}  // namespace xtrain::zero
