#include "xtrain/models/gpt_tensor_parallel.h"

#include <ATen/Functions.h>

#include <map>
#include <string>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/models/gpt.h"
#include "xtrain/parallel/tensor/mappings.h"
#include "xtrain/parallel/tensor/shard_spec.h"
#include "xtrain/parallel/tensor/vocab_parallel_cross_entropy.h"

namespace xtrain::models {

TensorParallelGPTImpl::TensorParallelGPTImpl(const ModelOptions& options, parallel::tensor::CommPtr tp)
    : options_(options), tp_(std::move(tp)) {
  const int64_t n = tp_ ? tp_->size() : 1;
  XTRAIN_USAGE_CHECK(options.tie_embeddings, "models: tensor_parallel.size > 1 needs xtrain.model.tie_embeddings");
  XTRAIN_USAGE_CHECK(options.dropout == 0.0, "models: tensor parallelism does not support dropout yet "
                     "(xtrain.model.dropout = ", options.dropout, ")");
  XTRAIN_USAGE_CHECK(options.attention.type == "dense", "models: tensor parallelism needs dense attention, got "
                     "xtrain.model.attention.type \"", options.attention.type, "\"");
  XTRAIN_USAGE_CHECK(options.vocab % n == 0 && options.heads % n == 0 && (4 * options.d_model) % n == 0,
                     "models: tensor_parallel.size ", n, " must divide xtrain.model.vocab (", options.vocab,
                     "), heads (", options.heads, ") and 4 x d_model (", 4 * options.d_model, ")");
  const bool gpt2_mlp =
      !options.args.is_object() || !options.args.contains("mlp_ratio") || options.args.at("mlp_ratio") == 4;
  XTRAIN_USAGE_CHECK(gpt2_mlp,
                     "models: tensor parallelism needs the GPT-2 MLP (xtrain.model.args.mlp_ratio 4), got ",
                     options.args.at("mlp_ratio").dump());
  const int64_t C = options.d_model;
  GPT full(options);  // the single-rank model from the caller's seed; this rank keeps its slices
  wte = register_module("wte", parallel::tensor::VocabParallelEmbedding(options.vocab, C, tp_));
  wpe = register_module("wpe", nn::Embedding(options.seq_len, C));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.layers; ++i) {
    blocks->push_back(parallel::tensor::ParallelBlock(C, options.heads, options.seq_len, tp_));
  }
  ln_f = register_module("ln_f", nn::LayerNorm(C));
  at::NoGradGuard no_grad;
  std::map<std::string, parallel::tensor::ShardSpec> specs;  // by child: modules() needs a shared_ptr to this
  for (const auto& child : named_children()) {
    for (const auto& [name, spec] : parallel::tensor::shard_specs(*child.value())) specs[child.key() + "." + name] = spec;
  }
  const auto whole = full->named_parameters();
  const int64_t r = tp_ ? tp_->rank() : 0;
  for (auto& p : named_parameters()) {
    const auto* src = whole.find(p.key());
    TORCH_INTERNAL_ASSERT(src != nullptr, "gpt_tensor_parallel: GPT has no parameter ", p.key());
    p.value().copy_(parallel::tensor::shard_of(*src, specs.at(p.key()), r, n));
  }
}

at::Tensor tensor_parallel_gpt_embed(parallel::tensor::VocabParallelEmbeddingImpl& wte, nn::EmbeddingImpl& wpe,
                                     const at::Tensor& idx, int64_t seq_len) {
  check_gpt_input(idx, seq_len);
  return wte.forward(idx) + wpe.weight.narrow(0, 0, idx.size(1));
}

at::Tensor tensor_parallel_gpt_head(const at::Tensor& h, parallel::tensor::VocabParallelEmbeddingImpl& wte,
                                    const parallel::tensor::CommPtr& tp) {
  // The tied head is column-parallel over the vocabulary: copy (all-reduce in backward), then this
  // rank's rows of wte.
  return at::matmul(parallel::tensor::copy_to_tensor_parallel(h, tp), wte.weight.t());
}

at::Tensor tensor_parallel_gpt_loss(const at::Tensor& logits, const at::Tensor& target,
                                    const parallel::tensor::CommPtr& tp) {
  return parallel::tensor::vocab_parallel_cross_entropy(logits, target, tp).mean();
}

at::Tensor TensorParallelGPTImpl::forward(const at::Tensor& idx) {
  auto x = tensor_parallel_gpt_embed(*wte, *wpe, idx, options_.seq_len);
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto& block = *blocks[i];
    x = runner_ ? runner_(static_cast<int64_t>(i), block, x) : blocks[i]->as<parallel::tensor::ParallelBlockImpl>()->forward(x);
  }
  return tensor_parallel_gpt_head(ln_f->forward(x), *wte, tp_);
}

at::Tensor TensorParallelGPTImpl::loss(const at::Tensor& logits, const at::Tensor& target) const {
  return tensor_parallel_gpt_loss(logits, target, tp_);
}

std::vector<std::shared_ptr<torch::nn::Module>> TensorParallelGPTImpl::routed_units() const {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  for (const auto& b : *blocks) out.push_back(b);
  return out;
}

void TensorParallelGPTImpl::wrap_units(Wrapper outer) {
  runner_ = [outer = std::move(outer), previous = runner_](int64_t i, torch::nn::Module& block, const at::Tensor& x) {
    const UnitFn inner = [&](const at::Tensor& in) {
      return previous ? previous(i, block, in) : dynamic_cast<parallel::tensor::ParallelBlockImpl&>(block).forward(in);
    };
    return outer(i, block, inner, x);
  };
}

}  // namespace xtrain::models
