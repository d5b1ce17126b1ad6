// Activation checkpointing: run a function without keeping its intermediate activations and
// recompute it in backward. One custom autograd function that saves only the input (and the RNG
// and autocast state it ran under), then reruns the function under that state so dropout draws the
// same masks and the gradients are bit-identical to the plain graph. Reference: PyTorch's
// torch.utils.checkpoint (reentrant variant, preserve_rng_state=True) and DeepSpeed's
// deepspeed.checkpointing.checkpoint; the parameters are explicit inputs, so gradients reach them
// through the outer graph (torch::autograd::grad works, not only .backward()).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <vector>

#include "xtrain/nn/options.h"

namespace xtrain::nn {

using CheckpointFn = std::function<at::Tensor(const at::Tensor&)>;

struct CheckpointOptions {
  // DeepSpeed's cpu_checkpointing: the saved input lives in CPU memory between forward and
  // backward and is copied back to its device for the recomputation. A no-op for CPU tensors.
  // (DeepSpeed needs partition_activations for it; without tensor parallelism there is nothing to
  // partition, so here it applies to the whole input.)
  bool cpu_checkpointing = false;
};

// y = fn(x), computed without recording a graph. In backward fn reruns on the saved x with the CPU
// (and, for a CUDA x, that device's) generator state and the autocast state of the forward, then
// the generator state is put back, so later random draws are unaffected. `params`: every tensor fn
// reads that needs a gradient (e.g. module.parameters()); tensors it reads that are not listed get
// no gradient. fn must be deterministic given the RNG state and must not modify x in place. It is
// copied and kept alive until backward.
at::Tensor checkpoint(CheckpointFn fn, const at::Tensor& x, const std::vector<at::Tensor>& params,
                      const CheckpointOptions& options = {});

// checkpoint() over module.forward-like `fn` with all of `module`'s parameters.
at::Tensor checkpoint_module(torch::nn::Module& module, CheckpointFn fn, const at::Tensor& x,
                             const CheckpointOptions& options = {});

// Which of `num_blocks` consecutive blocks are checkpointed under `options` (DeepSpeed's
// activation_checkpointing section): none unless enabled; number_checkpoints < 0 (null): all;
// otherwise the first min(number_checkpoints, num_blocks) — Megatron's "block" recompute method,
// which keeps the last blocks' activations (their backward comes first, nothing is gained by
// recomputing them). UsageError for number_checkpoints = 0 with enabled (checkpointing nothing
// while asking for it is a config mistake).
bool is_checkpointed(int64_t block, int64_t num_blocks, const ActivationCheckpointingOptions& options);

// CheckpointOptions from the config section. partition_activations and
// contiguous_memory_optimization are accepted and change nothing: without tensor parallelism there
// is one model-parallel rank (DeepSpeed's partition is then the whole tensor), and the contiguous
// buffer is a layout choice. profile and synchronize_checkpoint_boundary are "not supported yet".
CheckpointOptions checkpoint_options(const ActivationCheckpointingOptions& options);

}  // namespace xtrain::nn
