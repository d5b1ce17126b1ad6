// GPT-2 as nanoGPT lays it out: token embedding `wte` [V, C], position embedding `wpe` [T, C],
// embedding dropout, `blocks` (a ModuleList of nn::Block, so each block can be wrapped), final
// LayerNorm `ln_f`, and an LM head tied to `wte` (no parameter of its own) unless untied
// (`lm_head` [V, C], no bias). Init as GPT-2: N(0, 0.02), residual projections N(0, 0.02/√(2L)).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <functional>

#include "xtrain/models/options.h"
#include "xtrain/nn/block.h"
#include "xtrain/nn/embedding.h"
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/linear.h"
#include "xtrain/nn/unit_router.h"

namespace xtrain::models {

// UsageError unless idx is int64 [B, T] with T <= seq_len (the input of every GPT variant).
void check_gpt_input(const at::Tensor& idx, int64_t seq_len);

// xtrain.model.args.mlp_ratio: the MLP's hidden width over d_model; 4 (GPT-2) when unset.
// UsageError unless a positive integer.
int64_t gpt_mlp_ratio(const ModelOptions& options);

// GPTImpl's forward in pieces over its modules, so a pipeline stage that owns only some of them
// (gpt_pipeline.h) runs the same code. gpt_embed: check_gpt_input, wte(idx) + wpe(0..T-1), then
// dropout when training -> [B, T, C]. gpt_head: lm_head(h), or h · wteᵀ when lm_head is null (tied).
at::Tensor gpt_embed(nn::EmbeddingImpl& wte, nn::EmbeddingImpl& wpe, const at::Tensor& idx, int64_t seq_len,
                     double dropout, bool training);
at::Tensor gpt_head(const at::Tensor& h, nn::EmbeddingImpl& wte, nn::LinearImpl* lm_head);

class GPTImpl : public torch::nn::Module, public nn::UnitRouted {
 public:
  // Sizes from `options` (layers, d_model, heads, seq_len, vocab, dropout, tie_embeddings) and the
  // attention of every block (`attention`: dense or multiscale, windows, kernel; the parameters are
  // the same either way); UsageError on a bad size, window or kernel name. Deterministic given
  // torch::manual_seed before construction.
  explicit GPTImpl(const ModelOptions& options);

  at::Tensor forward(const at::Tensor& idx);  // int64 [B, T], T <= seq_len -> logits [B, T, V]
  at::Tensor hidden(const at::Tensor& idx);   // int64 [B, T] -> ln_f output [B, T, C]
  at::Tensor head(const at::Tensor& h);       // [..., C] -> logits [..., V]

  // How block i runs; the default calls block.forward(x). ZeRO-3 (gather/release around the
  // call) or activation checkpointing install a wrapper instead of editing forward.
  using BlockRunner = std::function<at::Tensor(int64_t i, nn::BlockImpl& block, const at::Tensor& x)>;
  void set_block_runner(BlockRunner runner) { block_runner_ = std::move(runner); }

  // nn::UnitRouted: the blocks, wrapped around the current block runner.
  std::vector<std::shared_ptr<torch::nn::Module>> routed_units() const override;
  void wrap_units(Wrapper outer) override;

  const ModelOptions& options() const { return options_; }

  // Public like LibTorch's own modules: the names are the registered parameter prefixes.
  nn::Embedding wte{nullptr};
  nn::Embedding wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  nn::LayerNorm ln_f{nullptr};
  nn::Linear lm_head{nullptr};  // empty when tie_embeddings

 private:
  void init_weights();

  ModelOptions options_;
  BlockRunner block_runner_;
};
TORCH_MODULE(GPT);

}  // namespace xtrain::models
