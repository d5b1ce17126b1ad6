// GPT as a sequence classifier (`xtrain.model.type: gpt_classifier`): the GPT trunk under the same
// parameter names as models::GPT (wte, wpe, blocks.N.*, ln_f), so an LM run's weights load into it
// by name (xtrain.model.init_from), then a pool over the non-padding positions and a linear
// `classifier` [classes, C] with bias. Design choice: the trunk is built by GPT itself (same init,
// same random draws); an encoder (args.causal false, the default) swaps each block's attention for
// the bidirectional one of the same kernel family, keeping its initial weights. Input ids < 0 are
// padding (data/text_classify_dataset.h pads on the right with -1): their embeddings are zero and
// no pool reads them. The kernels have no key mask, so in an encoder real tokens still attend to
// padded positions (as zero vectors); with causal true they never do (right padding).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <string>

#include "xtrain/models/options.h"
#include "xtrain/models/registry.h"
#include "xtrain/nn/embedding.h"
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/linear.h"

namespace xtrain::models {

// xtrain.model.args of gpt_classifier.
struct ClassifierArgs {
  std::string pool = "mean";  // mean over the real tokens | last real token
  bool causal = false;        // false: bidirectional encoder
};
// Reads and checks xtrain.model.args: UsageError naming the key for an unknown key or a bad value.
ClassifierArgs classifier_args(const ModelOptions& options);

class GptClassifierImpl : public torch::nn::Module {
 public:
  // GPT's sizes from `options` (vocab, layers, d_model, heads, seq_len, dropout, attention) plus
  // num_classes (> 0) and args. Deterministic given torch::manual_seed.
  explicit GptClassifierImpl(const ModelOptions& options);
  // int64 [B, T] (T <= seq_len; ids < 0 are padding) -> logits [B, num_classes].
  at::Tensor forward(const at::Tensor& idx);

  nn::Embedding wte{nullptr};
  nn::Embedding wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  nn::LayerNorm ln_f{nullptr};
  nn::Linear classifier{nullptr};

 private:
  ModelOptions options_;
  ClassifierArgs args_;
};
TORCH_MODULE(GptClassifier);

// The registry entry "gpt_classifier" (task classify; sample shape {seq_len}; a tiny shape for
// XTRAIN_SMOKE); its validate() checks xtrain.model.args.
ModelEntry gpt_classifier_entry();

}  // namespace xtrain::models
