// Activation checkpointing applied to a GPT: a block runner (GPTImpl::set_block_runner) that wraps
// the blocks nn::is_checkpointed selects in nn::checkpoint. The model's forward is unchanged; with
// grad off (eval, generate) blocks run plainly, since there is no graph to save.
#pragma once
#include <torch/nn/module.h>

#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_pipeline.h"
#include "xtrain/nn/options.h"

namespace xtrain::models {

// Installs the checkpointing runner on `gpt` when options.enabled (replacing any runner), and
// leaves it untouched otherwise. UsageError for options nn::checkpoint_options rejects.
void apply_activation_checkpointing(GPTImpl& gpt, const nn::ActivationCheckpointingOptions& options);

// The same for a type-erased model (models::Model::module): a GPT, a TensorParallelGPT or a
// PipelineGPT stage (their blocks are the units; a stage numbers its own blocks from 0 for
// number_checkpoints). UsageError when checkpointing is enabled and the module is none of these.
void apply_activation_checkpointing(torch::nn::Module& module, const nn::ActivationCheckpointingOptions& options);

// pipeline.activation_checkpoint_interval on a pipeline stage, its checkpoints configured by the
// activation_checkpointing section (cpu_checkpointing, …; DeepSpeed's PipelineModule calls
// deepspeed.checkpointing.checkpoint, which that section configures). UsageError when both this
// and activation_checkpointing.enabled are set: both would recompute the same blocks.
void apply_pipeline_checkpoint_interval(PipelineGPTImpl& stage, int64_t interval,
                                        const nn::ActivationCheckpointingOptions& options);

}  // namespace xtrain::models
