// make_attention (see attention_factory.h).
#include "xtrain/nn/attention_factory.h"

#include "xtrain/base/error.h"
#include "xtrain/nn/causal_self_attention.h"
#include "xtrain/nn/multiscale_attention.h"

namespace xtrain::nn {

torch::nn::AnyModule make_attention(int64_t C, int64_t NH, int64_t max_T, double dropout,
                                    const AttentionOptions& options, bool causal) {
  XTRAIN_USAGE_CHECK(options.type == "dense" || options.type == "multiscale",
                     "nn: xtrain.model.attention.type must be \"dense\" or \"multiscale\", got \"", options.type, "\"");
  if (options.type == "multiscale") {
    return torch::nn::AnyModule(MultiScaleAttention(C, NH, options.windows, causal, dropout, options.kernel));
  }
  if (options.kernel == "auto" && causal) return torch::nn::AnyModule(CausalSelfAttention(C, NH, max_T, dropout));
  return torch::nn::AnyModule(MultiScaleAttention(C, NH, std::vector<int64_t>{}, causal, dropout, options.kernel));
}

}  // namespace xtrain::nn
