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
#include <memory>
#include <vector>

#include "xtrain/nn/options.h"

namespace xtrain::nn {

using CheckpointFn = std::function<at::Tensor(const at::Tensor&)>;

// DeepSpeed's partition_activations: a checkpoint keeps only part of its input (keep) and rebuilds
// the whole input just before the recompute (restore). For a tensor-parallel block, whose input is
// the same on every rank of the group, each rank keeps 1/tp of it and restore all-gathers
// (models/gpt_checkpointing supplies that one; nn knows no process groups).
class ActivationPartitioner {
 public:
  virtual ~ActivationPartitioner() = default;
  virtual at::Tensor keep(const at::Tensor& x) const = 0;
  // `kept` as keep() returned it; returns a tensor of `sizes` equal to the x given to keep().
  virtual at::Tensor restore(const at::Tensor& kept, at::IntArrayRef sizes) const = 0;
};

struct CheckpointOptions {
  // DeepSpeed's cpu_checkpointing: the saved input lives in CPU memory between forward and
  // backward and is copied back to its device for the recomputation. A no-op for CPU tensors.
  // (DeepSpeed needs partition_activations for it; without tensor parallelism there is nothing to
  // partition, so here it applies to the whole input.)
  bool cpu_checkpointing = false;
  // partition_activations: null keeps the whole input. With cpu_checkpointing the kept part is
  // what moves to the CPU.
  std::shared_ptr<const ActivationPartitioner> partitioner;
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

// CheckpointOptions from the config section, without a partitioner (the caller adds one for
// partition_activations under tensor parallelism). contiguous_memory_optimization is accepted and
// changes nothing: the contiguous buffer is a layout choice. profile and
// synchronize_checkpoint_boundary are "not supported yet".
CheckpointOptions checkpoint_options(const ActivationCheckpointingOptions& options);

}  // namespace xtrain::nn
