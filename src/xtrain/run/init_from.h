// `xtrain.model.init_from`: weights for a freshly built model from a .safetensors file (ours or the Hugging Face GPT-2
// layout, detected by its names: models/hf_gpt2.h) or from a run directory (its latest checkpoint, consolidated and
// merged like `xtrain export`). Every parameter and buffer is matched by name: a tensor whose shape differs is always
// an error naming it and both shapes (one exception: a wpe with more positions than xtrain.model.seq_len keeps its
// first seq_len rows). `xtrain.model.init_strict` (default true) decides the rest: strict, a model tensor the source
// lacks or a source tensor the model lacks is an error naming them; not strict, the first stay at their fresh init and
// the second are ignored, both listed in the log (a classifier initialised from a language-model run keeps its new
// head). Floating-point tensors convert to the model's dtype; an integer or bool tensor for a floating-point one is an
// error.
#pragma once
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "xtrain/checkpoint/store.h"

namespace xtrain {

struct InitReport {
  std::string source;
  std::vector<std::string> loaded, fresh,
      ignored;  // model names; fresh/ignored: with their shapes
};

// The source's tensors under our names (a run directory, a .safetensors file in either layout).
checkpoint::NamedTensors read_init_source(const std::string& path);
// Copies `source` into `model` by the rules above; `what` names the source in errors.
InitReport load_init_weights(torch::nn::Module& model, const checkpoint::NamedTensors& source, bool strict,
                             const std::string& what);
// read_init_source + load_init_weights + a log line; UsageError naming xtrain.model.init_from.
InitReport init_model_from(torch::nn::Module& model, const std::string& path, bool strict);

}  // namespace xtrain
