// The GPT of gpt.h with its layers split over a tensor-parallel group (Megatron's layout): the token
// embedding vocabulary-parallel and tied to a column-parallel LM head (logits stay split by
// vocabulary; the loss is the vocabulary-parallel cross-entropy), blocks with the heads and the MLP's
// hidden units split (parallel::tensor::ParallelBlock), positions and LayerNorms whole on every
// rank. Parameter names are GPT's, and each rank's parameters are its slices of GPT(options) built
// from the same seed (parallel::tensor::shard_specs says how each is split), so a group of one is
// GPT and the shards unshard into GPT's parameters. The whole GPT exists on every rank while the
// slices are taken. No dropout yet (the parallel layers refuse it); tied embeddings only.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "xtrain/models/options.h"
#include "xtrain/nn/embedding.h"
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/unit_router.h"
#include "xtrain/parallel/tensor/parallel_block.h"
#include "xtrain/parallel/tensor/vocab_parallel_embedding.h"

namespace xtrain::models {

// TensorParallelGPTImpl's forward and loss in pieces over its modules, so a pipeline stage that
// owns only some of them (gpt_pipeline.h) runs the same code. embed: check_gpt_input, then
// wte(idx) + wpe(0..T-1) -> [B, T, C]; head: h -> this rank's logits [B, T, V / tp] (tied to wte).
at::Tensor tensor_parallel_gpt_embed(parallel::tensor::VocabParallelEmbeddingImpl& wte, nn::EmbeddingImpl& wpe,
                                     const at::Tensor& idx, int64_t seq_len);
at::Tensor tensor_parallel_gpt_head(const at::Tensor& h, parallel::tensor::VocabParallelEmbeddingImpl& wte,
                                    const parallel::tensor::CommPtr& tp);
at::Tensor tensor_parallel_gpt_loss(const at::Tensor& logits, const at::Tensor& target,
                                    const parallel::tensor::CommPtr& tp);

class TensorParallelGPTImpl : public torch::nn::Module, public nn::UnitRouted {
 public:
  // UsageError when the group size does not divide heads, 4·d_model or vocab, for dropout > 0 or
  // untied embeddings.
  TensorParallelGPTImpl(const ModelOptions& options, parallel::tensor::CommPtr tp);

  at::Tensor forward(const at::Tensor& idx);  // int64 [B, T] -> this rank's logits [B, T, V / tp]
  // Mean cross-entropy of the split logits against target ids [B, T]; equal on every rank.
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& target) const;

  std::vector<std::shared_ptr<torch::nn::Module>> routed_units() const override;
  void wrap_units(Wrapper outer) override;

  const ModelOptions& options() const { return options_; }
  const parallel::tensor::CommPtr& group() const { return tp_; }

  parallel::tensor::VocabParallelEmbedding wte{nullptr};
  nn::Embedding wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};  // of ParallelBlock
  nn::LayerNorm ln_f{nullptr};

 private:
  ModelOptions options_;
  parallel::tensor::CommPtr tp_;
  std::function<at::Tensor(int64_t, torch::nn::Module&, const at::Tensor&)> runner_;
};
TORCH_MODULE(TensorParallelGPT);

}  // namespace xtrain::models
