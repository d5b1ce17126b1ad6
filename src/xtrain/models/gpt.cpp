// GPT assembly and GPT-2 init (nanoGPT's _init_weights plus its c_proj rescale). Reference:
// tests/reference/gen_gpt.py, the same network in plain PyTorch.
#include "xtrain/models/gpt.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/linear.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::models {

namespace {

void check_options(const ModelOptions& o) {
  XTRAIN_USAGE_CHECK(o.layers > 0, "models: xtrain.model.layers must be > 0, got ", o.layers);
  XTRAIN_USAGE_CHECK(o.d_model > 0, "models: xtrain.model.d_model must be > 0, got ", o.d_model);
  XTRAIN_USAGE_CHECK(o.seq_len > 0, "models: xtrain.model.seq_len must be > 0, got ", o.seq_len);
  XTRAIN_USAGE_CHECK(o.vocab > 0, "models: xtrain.model.vocab must be > 0, got ", o.vocab);
  XTRAIN_USAGE_CHECK(o.dropout >= 0 && o.dropout < 1, "models: xtrain.model.dropout must be in [0, 1), got ",
                     o.dropout);
  XTRAIN_USAGE_CHECK(o.heads > 0 && o.d_model % o.heads == 0, "models: xtrain.model.heads (", o.heads,
                     ") must be > 0 and divide xtrain.model.d_model (", o.d_model, ")");
  // Multi-scale: heads split over the windows as evenly as possible; at least one head per window.
  if (o.attention.type == "multiscale") kernels::ms_attention::check_windows(o.heads, o.attention.windows);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// gpt's own args key (as vit's); other args keys are left to the variants that read them
// (gpt_classifier).
int64_t gpt_mlp_ratio(const ModelOptions& o) {
  if (!o.args.is_object() || !o.args.contains("mlp_ratio")) return 4;
  const auto& v = o.args.at("mlp_ratio");
  XTRAIN_USAGE_CHECK(v.is_number_integer() && v.get<int64_t>() > 0,
                     "models: xtrain.model.args.mlp_ratio must be a positive integer (MLP width / d_model), got ",
                     v.dump());
  return v.get<int64_t>();
}

GPTImpl::GPTImpl(const ModelOptions& options) : options_(options) {
  check_options(options);
  const int64_t C = options.d_model;
  wte = register_module("wte", nn::Embedding(options.vocab, C));
  wpe = register_module("wpe", nn::Embedding(options.seq_len, C));
  blocks = register_module("blocks", torch::nn::ModuleList());
  const int64_t ratio = gpt_mlp_ratio(options);
  for (int64_t i = 0; i < options.layers; ++i) {
    nn::Block block(C, options.heads, options.seq_len, options.dropout, options.attention);
    if (ratio != 4) {  // nn::Mlp is C -> 4C -> C; its forward works for any hidden width
      block->mlp->fc = block->mlp->replace_module("fc", nn::Linear(C, ratio * C));
      block->mlp->proj = block->mlp->replace_module("proj", nn::Linear(ratio * C, C));
    }
    blocks->push_back(block);
  }
  ln_f = register_module("ln_f", nn::LayerNorm(C));
  if (!options.tie_embeddings) lm_head = register_module("lm_head", nn::Linear(C, options.vocab, /*bias=*/false));
  init_weights();
}

void GPTImpl::init_weights() {
  at::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = dynamic_cast<nn::LinearImpl*>(m.get())) {
      torch::nn::init::normal_(linear->weight, 0.0, 0.02);
      if (linear->bias.defined()) torch::nn::init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<nn::EmbeddingImpl*>(m.get())) {
      torch::nn::init::normal_(embedding->weight, 0.0, 0.02);
    }  // LayerNorm is already 1 / 0
  }
  // GPT-2: residual projections scaled by 1/√(2L), one per residual branch.
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(options_.layers));
  for (auto& p : named_parameters()) {
    if (ends_with(p.key(), "attn.proj.weight") || ends_with(p.key(), "mlp.proj.weight")) {
      torch::nn::init::normal_(p.value(), 0.0, residual_std);
    }
  }
}

void check_gpt_input(const at::Tensor& idx, int64_t seq_len) {
  XTRAIN_USAGE_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong, "models: gpt input must be int64 [B, T], got ",
                     idx.scalar_type(), idx.sizes());
  XTRAIN_USAGE_CHECK(idx.size(1) <= seq_len, "models: gpt input has T=", idx.size(1),
                     " tokens, more than xtrain.model.seq_len=", seq_len);
}

at::Tensor gpt_embed(nn::EmbeddingImpl& wte, nn::EmbeddingImpl& wpe, const at::Tensor& idx, int64_t seq_len,
                     double dropout, bool training) {
  check_gpt_input(idx, seq_len);
  const int64_t T = idx.size(1);
  // Positions 0..T-1 are the first T rows of wpe: a view instead of an arange + gather.
  return kernels::dropout(wte.forward(idx) + wpe.weight.narrow(0, 0, T), dropout, training);
}

at::Tensor gpt_head(const at::Tensor& h, nn::EmbeddingImpl& wte, nn::LinearImpl* lm_head) {
  return lm_head ? lm_head->forward(h) : kernels::linear(h, wte.weight, at::Tensor());
}

at::Tensor GPTImpl::hidden(const at::Tensor& idx) {
  auto x = gpt_embed(*wte, *wpe, idx, options_.seq_len, options_.dropout, is_training());
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto* block = blocks[i]->as<nn::BlockImpl>();
    TORCH_INTERNAL_ASSERT(block != nullptr, "gpt: blocks[", i, "] is not an nn::Block (wrap it with set_block_runner)");
    x = block_runner_ ? block_runner_(static_cast<int64_t>(i), *block, x) : block->forward(x);
  }
  return ln_f->forward(x);
}

at::Tensor GPTImpl::head(const at::Tensor& h) { return gpt_head(h, *wte, lm_head ? lm_head.get() : nullptr); }

at::Tensor GPTImpl::forward(const at::Tensor& idx) { return head(hidden(idx)); }

std::vector<std::shared_ptr<torch::nn::Module>> GPTImpl::routed_units() const {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  for (const auto& b : *blocks) out.push_back(b);
  return out;
}

void GPTImpl::wrap_units(Wrapper outer) {
  block_runner_ = [outer = std::move(outer), previous = block_runner_](int64_t i, nn::BlockImpl& block,
                                                                        const at::Tensor& x) {
    const UnitFn inner = [&](const at::Tensor& in) { return previous ? previous(i, block, in) : block.forward(in); };
    return outer(i, block, inner, x);
  };
}

}  // namespace xtrain::models
