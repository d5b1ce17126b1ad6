// What `xtrain serve` serves, assembled by the CLI from a run directory (serve/ sits beside run/ and
// does not read run directories itself): a language model's incremental decoder and tokenizer, or
// a classifier's forward. int8_decoder_weights turns the int8 plan of `xtrain compress` into the
// decoder's layer replacements, so the compressed model decodes on the int8 kernels.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xtrain/models/kv_cache.h"

namespace xtrain::data {
class Tokenizer;
}
namespace xtrain::compress {
struct Graph;
class QuantPlan;
}  // namespace xtrain::compress

namespace xtrain::serve {

struct ServedModel {
  std::string name;  // "model" in responses (the run directory's name)
  std::string task;  // "lm" | "classify"
  std::shared_ptr<models::IncrementalDecoder> decoder;  // lm
  std::shared_ptr<const data::Tokenizer> tokenizer;     // text runs (lm, and text classifiers)
  // classify: input [1, ...] (int64 token ids for a text classifier, float for others) -> [1, classes]
  std::function<at::Tensor(const at::Tensor&)> classify;
  std::vector<int64_t> sample_shape;  // one input without the batch dim (tensor classifiers)
  int64_t max_tokens_in = 0;          // text classifiers: ids kept (the model's seq_len)
  std::vector<std::string> class_names;
  std::string precision = "fp32";     // "fp32" | "int8" (for /health)
};

// The layer replacements that run a converted plan's int8 linears and its dequantised embedding
// tables (what compress's graph executor runs), keyed by the traced module paths.
models::DecoderWeights int8_decoder_weights(const compress::Graph& graph, const compress::QuantPlan& plan);

}  // namespace xtrain::serve
