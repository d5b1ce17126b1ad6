// `xtrain.model`: which assembly to build and its sizes (ours: DeepSpeed takes the model from the
// user's script). The defaults are the default GPT: byte-level, about 3M parameters.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/nn/options.h"

namespace xtrain::models {

// `xtrain.model.attention` lives in nn/ (the layer that builds attention); the old name stays.
using AttentionOptions = nn::AttentionOptions;

struct ModelOptions {
  std::string type = "gpt";  // a registered model (models/registry.h): gpt | resnet18 | mlp | a plugin's
  // gpt
  int64_t layers = 4;
  int64_t d_model = 256;
  int64_t heads = 4;
  int64_t seq_len = 256;
  int64_t vocab = 256;  // byte-level
  double dropout = 0.0;
  bool tie_embeddings = true;
  AttentionOptions attention;
  // mlp
  std::vector<int64_t> hidden = {512, 256};
  // image models: filled from the dataset when left at 0
  int64_t num_classes = 0;
  int64_t in_features = 0;  // mlp: flattened sample size (1x28x28 images: 784)
  // A registered model's own settings, read and checked by its entry (the config layer reads it whole).
  nlohmann::json args = nlohmann::json::object();
  // Weights before training (run/init_from.h): a .safetensors file (ours or HF GPT-2's layout) or a run dir.
  std::string init_from;
  bool init_strict = true;  // false: model tensors the source lacks stay fresh, extra source tensors are ignored
  template <class V>
  void visit(V& v) {
    v("type", type, "registered model: gpt, resnet18, mlp or a plugin's (see Registered models)");
    v("layers", layers, "gpt: transformer blocks");
    v("d_model", d_model, "gpt: embedding width (C)");
    v("heads", heads, "gpt: attention heads (NH)");
    v("seq_len", seq_len, "gpt: context length (T)");
    v("vocab", vocab, "gpt: vocabulary size (V; 256 for bytes)");
    v("dropout", dropout, "dropout probability (gpt, mlp)");
    v("tie_embeddings", tie_embeddings, "gpt: the LM head shares the token embedding");
    v("attention", attention, "gpt: attention settings");
    v("hidden", hidden, "mlp: hidden layer widths");
    v("num_classes", num_classes, "image models: classes (0: from the dataset)");
    v("in_features", in_features, "mlp: flattened input size (0: from the dataset)");
    v("args", args, "a registered model's own settings (a JSON object, checked by the model)");
    v("init_from", init_from,
      "initial weights: a .safetensors file (xtrain or Hugging Face GPT-2 names) or a run directory (\"\": none)");
    v("init_strict", init_strict,
      "init_from: every model tensor must be in the source and every source tensor in the model "
      "(false: the missing stay fresh, the extra are ignored; both logged)");
  }
};

}  // namespace xtrain::models
