// The checkpointing block runner. The recompute function holds the block by shared_ptr, so a
// graph that outlives the call (loss kept for a later backward) still finds its block.
#include "xtrain/models/gpt_checkpointing.h"

#include <ATen/core/grad_mode.h>

#include <memory>

#include "xtrain/base/error.h"
#include "xtrain/nn/checkpoint.h"

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

void apply_activation_checkpointing(torch::nn::Module& module, const nn::ActivationCheckpointingOptions& options) {
  if (!options.enabled) return;
  auto* gpt = dynamic_cast<GPTImpl*>(&module);
  XTRAIN_USAGE_CHECK(gpt != nullptr, "models: activation_checkpointing.enabled needs a gpt model (its blocks are "
                     "the checkpoint units), got a ", module.name());
  apply_activation_checkpointing(*gpt, options);
}

}  // namespace xtrain::models
