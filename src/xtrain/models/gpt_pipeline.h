// One pipeline stage of a GPT or a TensorParallelGPT (DeepSpeed's PipelineModule over GPT's layers):
// the first stage embeds, every stage runs its contiguous range of blocks, the last applies ln_f
// and the LM head. The choice: a stage registers the whole model's own submodules (shared, not
// copied) under the whole model's names ("blocks.3.attn.qkv.weight"), so checkpoints, ZeRO and
// per-parameter options see GPT's names, and dropping the whole model frees the other stages'
// modules. With tied embeddings wte is on the first and the last stage; the caller all-reduces
// its gradient over the embedding group (tied_parameters(); Megatron's embedding group).
// set_activation_checkpoint_interval is PipelineModule's activation_checkpoint_interval: every run
// of N consecutive blocks is one checkpoint (one saved input, recomputed together in backward).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/models/options.h"
#include "xtrain/nn/checkpoint.h"
#include "xtrain/nn/unit_router.h"
#include "xtrain/parallel/tensor/mappings.h"

namespace xtrain::models {

class PipelineGPTImpl : public torch::nn::Module, public nn::UnitRouted {
 public:
  // whole: a built GPTImpl or TensorParallelGPTImpl (the same seed on every stage, so the two
  // copies of a tied wte start equal). Blocks are split with parallel::pipeline::partition_layers
  // ("uniform" | "parameters", weights = each block's parameter count). UsageError when stages <
  // 1, stage is not in [0, stages), stages > layers, the method is unknown or `whole` is another
  // module. The whole model's block runner (set_block_runner, wrap_units) is not carried over:
  // wrap this stage instead.
  PipelineGPTImpl(const std::shared_ptr<torch::nn::Module>& whole, int stage, int stages,
                  const std::string& partition_method = "parameters");

  // First stage: int64 ids [B, T] (check_gpt_input); other stages: the previous stage's hidden
  // [B, T, C]. Last stage: logits [B, T, V] (GPT) or this rank's vocabulary slice [B, T, V / tp]
  // (TensorParallelGPT); other stages: hidden [B, T, C].
  at::Tensor forward(const at::Tensor& x);
  // Last stage: the whole model's training loss of `logits` against ids [B, T], mean over tokens
  // (cross-entropy, or the vocabulary-parallel cross-entropy under tensor parallelism).
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& target) const;

  // This stage's parameters that the other end of the pipeline holds too: {"wte.weight"} on the
  // first and the last stage when the head is tied and stages > 1, else empty (middle stages).
  // Their gradients are partial on each of the two stages until summed over the embedding group.
  std::vector<std::string> tied_parameters() const;

  // DeepSpeed's PipelineModule(activation_checkpoint_interval=N): with grad on, this stage's blocks
  // run in groups of N [0, N), [N, 2N), …, each group under nn::checkpoint with `how`; 0 turns it
  // off. Embedding and head are never checkpointed. UsageError for N < 0.
  void set_activation_checkpoint_interval(int64_t interval, nn::CheckpointOptions how = {});
  int64_t activation_checkpoint_interval() const { return checkpoint_interval_; }

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == stages_ - 1; }
  // All stages' block boundaries (stages + 1 of them): stage s runs blocks [b[s], b[s + 1]).
  const std::vector<int>& layer_bounds() const { return bounds_; }
  const ModelOptions& options() const { return options_; }
  // The TensorParallelGPT's group this stage was cut from; null for a plain GPT.
  const parallel::tensor::CommPtr& tensor_parallel_group() const { return tp_; }

  // nn::UnitRouted: this stage's blocks, index 0 = block layer_bounds()[stage()].
  std::vector<std::shared_ptr<torch::nn::Module>> routed_units() const override;
  void wrap_units(Wrapper outer) override;

 private:
  at::Tensor embed(const at::Tensor& idx);
  at::Tensor head(const at::Tensor& x);
  at::Tensor run_units(size_t begin, size_t end, at::Tensor x);  // blocks [begin, end) of this stage

  bool tensor_parallel_ = false;
  bool tied_ = true;  // the LM head is wte
  ModelOptions options_;
  parallel::tensor::CommPtr tp_;  // TensorParallelGPT's group, else null
  int stage_ = 0, stages_ = 1;
  std::vector<int> bounds_;
  // Registered as "wte", "wpe", "blocks" (children named by global index), "ln_f", "lm_head";
  // null where this stage does not own them.
  std::shared_ptr<torch::nn::Module> wte_, wpe_, blocks_, ln_f_, lm_head_;
  std::vector<std::shared_ptr<torch::nn::Module>> units_;  // blocks_'s children, in order
  std::function<at::Tensor(int64_t, torch::nn::Module&, const at::Tensor&)> runner_;
  int64_t checkpoint_interval_ = 0;
  nn::CheckpointOptions checkpoint_how_;
};
TORCH_MODULE(PipelineGPT);

}  // namespace xtrain::models
