// GptClassifier (see gpt_classifier.h). Reference: the classifier in tests/models/gpt_classifier_test
// recomputes this forward from GPT's hidden states.
#include "xtrain/models/gpt_classifier.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/models/gpt.h"
#include "xtrain/nn/attention_factory.h"

namespace xtrain::models {
namespace {

// Block i's attention as the bidirectional module of the same kind, with the weights it had.
void make_bidirectional(nn::BlockImpl& block, const ModelOptions& o) {
  at::NoGradGuard no_grad;
  auto fresh = nn::make_attention(o.d_model, o.heads, o.seq_len, o.dropout, o.attention, /*causal=*/false);
  const auto old = block.attn.ptr()->named_parameters();
  for (auto& p : fresh.ptr()->named_parameters()) {
    const auto* before = old.find(p.key());
    TORCH_INTERNAL_ASSERT(before != nullptr, "gpt_classifier: the encoder attention has ", p.key(),
                          " which the causal one lacks");
    p.value().copy_(*before);
  }
  block.attn = std::move(fresh);
  block.replace_module("attn", block.attn.ptr());
}

}  // namespace

ClassifierArgs classifier_args(const ModelOptions& o) {
  ClassifierArgs a;
  XTRAIN_USAGE_CHECK(o.args.is_object(), "models: xtrain.model.args must be a JSON object, got ", o.args.dump());
  for (const auto& [key, value] : o.args.items()) {
    if (key == "pool") {
      XTRAIN_USAGE_CHECK(value.is_string() && (value == "mean" || value == "last"),
                         "models: xtrain.model.args.pool must be \"mean\" or \"last\", got ", value.dump());
      a.pool = value.get<std::string>();
    } else if (key == "causal") {
      XTRAIN_USAGE_CHECK(value.is_boolean(), "models: xtrain.model.args.causal must be true or false, got ",
                         value.dump());
      a.causal = value.get<bool>();
    } else {
      XTRAIN_USAGE_ERROR("models: xtrain.model.args.", key, " is not a gpt_classifier setting (pool, causal)");
    }
  }
  return a;
}

GptClassifierImpl::GptClassifierImpl(const ModelOptions& options)
    : options_(options), args_(classifier_args(options)) {
  XTRAIN_USAGE_CHECK(options.num_classes > 0, "models: gpt_classifier needs xtrain.model.num_classes > 0 (set it or "
                     "use a classification dataset such as text_classify), got ", options.num_classes);
  ModelOptions trunk = options;
  trunk.tie_embeddings = true;  // no LM head: the classifier replaces it
  GPT gpt(trunk);
  wte = register_module("wte", gpt->wte);
  wpe = register_module("wpe", gpt->wpe);
  blocks = register_module("blocks", gpt->blocks);
  ln_f = register_module("ln_f", gpt->ln_f);
  if (!args_.causal) {
    for (const auto& b : *blocks) make_bidirectional(*b->as<nn::BlockImpl>(), options);
  }
  classifier = register_module("classifier", nn::Linear(options.d_model, options.num_classes));
  at::NoGradGuard no_grad;
  torch::nn::init::normal_(classifier->weight, 0.0, 0.02);  // as GPT's linears
  torch::nn::init::zeros_(classifier->bias);
}

at::Tensor GptClassifierImpl::forward(const at::Tensor& idx) {
  check_gpt_input(idx, options_.seq_len);
  const at::Tensor real = idx.ge(0);  // [B, T]
  auto x = gpt_embed(*wte, *wpe, idx.clamp_min(0), options_.seq_len, options_.dropout, is_training());
  const at::Tensor mask = real.unsqueeze(-1).to(x.scalar_type());  // [B, T, 1]
  x = x * mask;
  for (const auto& b : *blocks) x = b->as<nn::BlockImpl>()->forward(x);
  x = ln_f->forward(x);
  at::Tensor pooled;
  if (args_.pool == "mean") {
    pooled = (x * mask).sum(1) / mask.sum(1).clamp_min(1.0);
  } else {
    const at::Tensor last = real.sum(1).sub(1).clamp_min(0);  // [B]: right padding
    pooled = x.gather(1, last.view({-1, 1, 1}).expand({x.size(0), 1, x.size(2)})).squeeze(1);
  }
  return classifier->forward(pooled);
}

ModelEntry gpt_classifier_entry() {
  ModelEntry e;
  e.description = "GPT trunk (gpt's parameter names: an LM run's weights load into it) as a text encoder, a mean or "
                  "last-token pool over the non-padding tokens, a linear head to the classes";
  e.task = "classify";
  e.build = [](const ModelOptions& o) {
    auto m = GptClassifier(o).ptr();
    return Model{m, [m](const at::Tensor& idx) { return m->forward(idx); }, "classify", o};
  };
  e.keys = {{"layers", ""}, {"d_model", ""}, {"heads", ""}, {"seq_len", ""}, {"vocab", "from the dataset's tokenizer"},
            {"dropout", ""}, {"attention", ""}, {"num_classes", "0: from the dataset"},
            {"args.pool", "mean (default) or last"}, {"args.causal", "false (default): bidirectional encoder"}};
  e.validate = [](const ModelOptions& o) { classifier_args(o); };
  e.sample_shape = [](const ModelOptions& o) { return std::vector<int64_t>{o.seq_len}; };
  e.tiny = [](const ModelOptions& m, const TinyLimits& l) {
    const int64_t windows = m.attention.type == "multiscale" ? static_cast<int64_t>(m.attention.windows.size()) : 0;
    const int64_t heads = std::max({std::min<int64_t>(m.heads, 4), windows, int64_t{1}});
    return std::vector<std::pair<std::string, int64_t>>{
        {"layers", 1}, {"heads", heads}, {"d_model", heads * l.head_size}, {"seq_len", std::min(m.seq_len, l.seq_len)}};
  };
  return e;
}

}  // namespace xtrain::models
