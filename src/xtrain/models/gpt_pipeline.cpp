// PipelineGPT; see gpt_pipeline.h. The math is the whole model's own (gpt_embed / gpt_head,
// tensor_parallel_gpt_embed / _head / _loss); this file only chooses which modules a stage owns.
#include "xtrain/models/gpt_pipeline.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/models/factory.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_tensor_parallel.h"
#include "xtrain/nn/losses.h"
#include "xtrain/parallel/pipeline/partition.h"

namespace xtrain::models {
namespace {

at::Tensor run_block(bool tensor_parallel, torch::nn::Module& block, const at::Tensor& x) {
  if (tensor_parallel) return dynamic_cast<parallel::tensor::ParallelBlockImpl&>(block).forward(x);
  return dynamic_cast<nn::BlockImpl&>(block).forward(x);
}

}  // namespace

PipelineGPTImpl::PipelineGPTImpl(const std::shared_ptr<torch::nn::Module>& whole, int stage, int stages,
                                 const std::string& partition_method)
    : stage_(stage), stages_(stages) {
  std::shared_ptr<torch::nn::Module> wte, wpe, ln_f, lm_head;
  torch::nn::ModuleList blocks{nullptr};
  if (auto gpt = std::dynamic_pointer_cast<GPTImpl>(whole)) {
    options_ = gpt->options();
    wte = gpt->wte.ptr();
    wpe = gpt->wpe.ptr();
    blocks = gpt->blocks;
    ln_f = gpt->ln_f.ptr();
    if (!gpt->lm_head.is_empty()) lm_head = gpt->lm_head.ptr();
  } else if (auto tp = std::dynamic_pointer_cast<TensorParallelGPTImpl>(whole)) {
    tensor_parallel_ = true;
    options_ = tp->options();
    tp_ = tp->group();
    wte = tp->wte.ptr();
    wpe = tp->wpe.ptr();
    blocks = tp->blocks;
    ln_f = tp->ln_f.ptr();
  } else {
    XTRAIN_USAGE_ERROR("models: a pipeline stage is cut from a GPT or a TensorParallelGPT, got ",
                       whole ? whole->name() : std::string("no model"));
  }
  const int layers = static_cast<int>(blocks->size());
  XTRAIN_USAGE_CHECK(stages >= 1 && stages <= layers, "models: pipeline stages must be in [1, xtrain.model.layers = ",
                     layers, "] (every stage runs at least one block), got ", stages, " (pipeline.stages)");
  XTRAIN_USAGE_CHECK(stage >= 0 && stage < stages, "models: pipeline stage must be in [0, ", stages, "), got ", stage);
  std::vector<int64_t> weights;
  for (const auto& b : *blocks) weights.push_back(count_parameters(*b));
  bounds_ = parallel::pipeline::partition_layers(weights, stages, partition_method);
  TORCH_INTERNAL_ASSERT(bounds_.size() == static_cast<size_t>(stages) + 1 && bounds_[stages] == layers);

  // Registration order = the whole model's order (wte, wpe, blocks, ln_f, lm_head), so this
  // stage's parameters are a subsequence of the whole model's.
  tied_ = lm_head == nullptr;
  if (is_first() || (is_last() && tied_)) wte_ = register_module("wte", wte);
  if (is_first()) wpe_ = register_module("wpe", wpe);
  blocks_ = register_module("blocks", std::make_shared<torch::nn::Module>());
  for (int i = bounds_[stage]; i < bounds_[stage + 1]; ++i) {
    units_.push_back(blocks_->register_module(std::to_string(i), blocks[i]));
  }
  if (is_last()) {
    ln_f_ = register_module("ln_f", ln_f);
    if (!tied_) lm_head_ = register_module("lm_head", lm_head);
  }

  const auto all = whole->named_parameters();
  for (const auto& p : named_parameters()) {
    const auto* w = all.find(p.key());
    TORCH_INTERNAL_ASSERT(w != nullptr && w->is_same(p.value()), "gpt_pipeline: stage parameter ", p.key(),
                          " is not the whole model's parameter of that name");
  }
}

at::Tensor PipelineGPTImpl::embed(const at::Tensor& idx) {
  if (tensor_parallel_) {
    return tensor_parallel_gpt_embed(*wte_->as<parallel::tensor::VocabParallelEmbeddingImpl>(),
                                     *wpe_->as<nn::EmbeddingImpl>(), idx, options_.seq_len);
  }
  return gpt_embed(*wte_->as<nn::EmbeddingImpl>(), *wpe_->as<nn::EmbeddingImpl>(), idx, options_.seq_len,
                   options_.dropout, is_training());
}

at::Tensor PipelineGPTImpl::head(const at::Tensor& x) {
  const auto h = ln_f_->as<nn::LayerNormImpl>()->forward(x);
  if (tensor_parallel_) {
    return tensor_parallel_gpt_head(h, *wte_->as<parallel::tensor::VocabParallelEmbeddingImpl>(), tp_);
  }
  return gpt_head(h, *wte_->as<nn::EmbeddingImpl>(), lm_head_ ? lm_head_->as<nn::LinearImpl>() : nullptr);
}

at::Tensor PipelineGPTImpl::forward(const at::Tensor& in) {
  at::Tensor x;
  if (is_first()) {
    x = embed(in);
  } else {
    XTRAIN_USAGE_CHECK(in.dim() == 3 && in.size(2) == options_.d_model, "models: pipeline stage ", stage_,
                       " takes the previous stage's hidden states [B, T, ", options_.d_model, "], got ", in.sizes());
    x = in;
  }
  const size_t n = units_.size();
  const size_t group = checkpoint_interval_ > 0 ? static_cast<size_t>(checkpoint_interval_) : std::max<size_t>(n, 1);
  for (size_t begin = 0; begin < n; begin += group) {
    const size_t end = std::min(n, begin + group);
    if (checkpoint_interval_ == 0 || !at::GradMode::is_enabled()) {
      x = run_units(begin, end, x);
      continue;
    }
    // The recompute holds this stage by shared_ptr: a graph kept past the call still finds it.
    auto self = std::static_pointer_cast<PipelineGPTImpl>(shared_from_this());
    std::vector<at::Tensor> params;
    for (size_t k = begin; k < end; ++k) {
      for (const auto& p : units_[k]->parameters()) params.push_back(p);
    }
    x = nn::checkpoint([self, begin, end](const at::Tensor& in) { return self->run_units(begin, end, in); }, x, params,
                       checkpoint_how_);
  }
  return is_last() ? head(x) : x;
}

at::Tensor PipelineGPTImpl::run_units(size_t begin, size_t end, at::Tensor x) {
  for (size_t k = begin; k < end; ++k) {
    x = runner_ ? runner_(static_cast<int64_t>(k), *units_[k], x) : run_block(tensor_parallel_, *units_[k], x);
  }
  return x;
}

void PipelineGPTImpl::set_activation_checkpoint_interval(int64_t interval, nn::CheckpointOptions how) {
  XTRAIN_USAGE_CHECK(interval >= 0, "models: pipeline.activation_checkpoint_interval must be >= 0 (0: off), got ",
                     interval);
  checkpoint_interval_ = interval;
  checkpoint_how_ = how;
}

at::Tensor PipelineGPTImpl::loss(const at::Tensor& logits, const at::Tensor& target) const {
  XTRAIN_USAGE_CHECK(is_last(), "models: only the last pipeline stage computes the loss (this is stage ", stage_,
                     " of ", stages_, ")");
  if (tensor_parallel_) return tensor_parallel_gpt_loss(logits, target, tp_);
  return nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
}

std::vector<std::string> PipelineGPTImpl::tied_parameters() const {
  if (stages_ > 1 && tied_ && (is_first() || is_last())) return {"wte.weight"};
  return {};
}

std::vector<std::shared_ptr<torch::nn::Module>> PipelineGPTImpl::routed_units() const { return units_; }

void PipelineGPTImpl::wrap_units(Wrapper outer) {
  runner_ = [tp = tensor_parallel_, outer = std::move(outer), previous = runner_](int64_t i, torch::nn::Module& block,
                                                                                  const at::Tensor& x) {
    const UnitFn inner = [&](const at::Tensor& in) {
      return previous ? previous(i, block, in) : run_block(tp, block, in);
    };
    return outer(i, block, inner, x);
  };
}

}  // namespace xtrain::models
