// The checkpointing block runner. The recompute function holds the block by shared_ptr, so a
// graph that outlives the call (loss kept for a later backward) still finds its block.
// partition_activations under tensor parallelism: each rank keeps its 1/tp slice of a block's input
// (the residual stream, equal on every rank) and the recompute all-gathers it first.
#include "xtrain/models/gpt_checkpointing.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <memory>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/models/gpt_tensor_parallel.h"
#include "xtrain/nn/checkpoint.h"
#include "xtrain/nn/unit_router.h"
#include "xtrain/parallel/tensor/parallel_block.h"

namespace xtrain::models {
namespace {

// Rank r keeps elements [r·k, (r+1)·k) of the flattened input, k = ceil(numel / tp), zero-padded.
class TensorParallelPartitioner : public nn::ActivationPartitioner {
 public:
  explicit TensorParallelPartitioner(parallel::tensor::CommPtr tp) : tp_(std::move(tp)) {}
  at::Tensor keep(const at::Tensor& x) const override {
    const int64_t n = x.numel(), k = (n + tp_->size() - 1) / tp_->size();
    const int64_t begin = std::min(n, tp_->rank() * k), len = std::min(k, n - begin);
    at::Tensor part = at::zeros({k}, x.options());
    if (len > 0) part.narrow(0, 0, len).copy_(x.reshape({-1}).narrow(0, begin, len));
    return part;
  }
  at::Tensor restore(const at::Tensor& kept, at::IntArrayRef sizes) const override {
    at::Tensor all = at::empty({kept.numel() * tp_->size()}, kept.options());
    tp_->all_gather(kept.contiguous(), all);
    return all.narrow(0, 0, c10::multiply_integers(sizes)).view(sizes);
  }

 private:
  parallel::tensor::CommPtr tp_;
};

// The module's tensor-parallel group (null for a plain GPT or a stage cut from one).
parallel::tensor::CommPtr tensor_parallel_group(const torch::nn::Module& module) {
  if (const auto* tp = dynamic_cast<const TensorParallelGPTImpl*>(&module)) return tp->group();
  if (const auto* stage = dynamic_cast<const PipelineGPTImpl*>(&module)) return stage->tensor_parallel_group();
  return nullptr;
}

// nn::checkpoint_options plus, for partition_activations, a partitioner over the module's group.
nn::CheckpointOptions checkpoint_how(const torch::nn::Module& module, const nn::ActivationCheckpointingOptions& options) {
  nn::CheckpointOptions how = nn::checkpoint_options(options);
  if (!options.partition_activations) return how;
  const auto tp = tensor_parallel_group(module);
  if (tp && tp->size() > 1) {
    how.partitioner = std::make_shared<TensorParallelPartitioner>(tp);
  } else {
    log::info("config: activation_checkpointing.partition_activations has no effect here: without tensor "
              "parallelism (tensor_parallel.size 1) there is one rank to partition over");
  }
  return how;
}

}  // namespace

void apply_activation_checkpointing(GPTImpl& gpt, const nn::ActivationCheckpointingOptions& options) {
  if (!options.enabled) return;
  const nn::CheckpointOptions how = checkpoint_how(gpt, options);
  const int64_t num_blocks = static_cast<int64_t>(gpt.blocks->size());
  for (int64_t i = 0; i < num_blocks; ++i) nn::is_checkpointed(i, num_blocks, options);  // validates once
  gpt.set_block_runner([options, how, num_blocks](int64_t i, nn::BlockImpl& block, const at::Tensor& x) {
    if (!at::GradMode::is_enabled() || !nn::is_checkpointed(i, num_blocks, options)) return block.forward(x);
    auto owner = std::static_pointer_cast<nn::BlockImpl>(block.shared_from_this());
    return nn::checkpoint_module(
        block, [owner](const at::Tensor& in) { return owner->forward(in); }, x, how);
  });
}

namespace {
// A block's forward that stays valid after the call (for the recompute in backward).
nn::CheckpointFn block_forward(torch::nn::Module& unit) {
  if (auto* b = dynamic_cast<nn::BlockImpl*>(&unit)) {
    auto owner = std::static_pointer_cast<nn::BlockImpl>(b->shared_from_this());
    return [owner](const at::Tensor& in) { return owner->forward(in); };
  }
  if (auto* b = dynamic_cast<parallel::tensor::ParallelBlockImpl*>(&unit)) {
    auto owner = std::static_pointer_cast<parallel::tensor::ParallelBlockImpl>(b->shared_from_this());
    return [owner](const at::Tensor& in) { return owner->forward(in); };
  }
  XTRAIN_USAGE_ERROR("models: activation checkpointing cannot recompute a ", unit.name(), " unit");
}
}  // namespace

void apply_activation_checkpointing(torch::nn::Module& module, const nn::ActivationCheckpointingOptions& options) {
  if (!options.enabled) return;
  if (auto* gpt = dynamic_cast<GPTImpl*>(&module)) return apply_activation_checkpointing(*gpt, options);
  // A tensor-parallel GPT or a pipeline stage: its blocks through nn::UnitRouted. Under tensor
  // parallelism the recompute repeats the block's collectives, in the same order on every rank.
  auto* routed = dynamic_cast<nn::UnitRouted*>(&module);
  XTRAIN_USAGE_CHECK(routed != nullptr, "models: activation_checkpointing.enabled needs a gpt model (its blocks are "
                     "the checkpoint units), got a ", module.name());
  const nn::CheckpointOptions how = checkpoint_how(module, options);
  const auto num_blocks = static_cast<int64_t>(routed->routed_units().size());
  for (int64_t i = 0; i < num_blocks; ++i) nn::is_checkpointed(i, num_blocks, options);  // validates once
  routed->wrap_units([options, how, num_blocks](int64_t i, torch::nn::Module& unit, const nn::UnitRouted::UnitFn& inner,
                                                const at::Tensor& x) {
    if (!at::GradMode::is_enabled() || !nn::is_checkpointed(i, num_blocks, options)) return inner(x);
    return nn::checkpoint_module(unit, block_forward(unit), x, how);
  });
}

void apply_pipeline_checkpoint_interval(PipelineGPTImpl& stage, int64_t interval,
                                        const nn::ActivationCheckpointingOptions& options) {
  if (interval == 0) return;
  XTRAIN_USAGE_CHECK(!options.enabled, "config: pipeline.activation_checkpoint_interval (", interval,
                     ") and activation_checkpointing.enabled both recompute the stage's blocks: set one "
                     "(the interval checkpoints groups of blocks, enabled + number_checkpoints single blocks)");
  stage.set_activation_checkpoint_interval(interval, checkpoint_how(stage, options));
}

}  // namespace xtrain::models
