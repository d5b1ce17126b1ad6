// The checkpointing block runner. The recompute function holds the block by shared_ptr, so a
// graph that outlives the call (loss kept for a later backward) still finds its block.
#include "xtrain/models/gpt_checkpointing.h"

#include <ATen/core/grad_mode.h>

#include <memory>

#include "xtrain/base/error.h"
#include "xtrain/nn/checkpoint.h"
#include "xtrain/nn/unit_router.h"
#include "xtrain/parallel/tensor/parallel_block.h"

namespace xtrain::models {

void apply_activation_checkpointing(GPTImpl& gpt, const nn::ActivationCheckpointingOptions& options) {
  if (!options.enabled) return;
  const nn::CheckpointOptions how = nn::checkpoint_options(options);
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
  const nn::CheckpointOptions how = nn::checkpoint_options(options);
  const auto num_blocks = static_cast<int64_t>(routed->routed_units().size());
  for (int64_t i = 0; i < num_blocks; ++i) nn::is_checkpointed(i, num_blocks, options);  // validates once
  routed->wrap_units([options, how, num_blocks](int64_t i, torch::nn::Module& unit, const nn::UnitRouted::UnitFn& inner,
                                                const at::Tensor& x) {
    if (!at::GradMode::is_enabled() || !nn::is_checkpointed(i, num_blocks, options)) return inner(x);
    return nn::checkpoint_module(unit, block_forward(unit), x, how);
  });
}

}  // namespace xtrain::models
