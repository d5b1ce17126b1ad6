// Autoregressive sampling from a GPT (nanoGPT's generate): crop the context to seq_len, scale the
// last position's logits by 1/temperature, keep the top_k, sample with a CPU generator seeded by
// `seed`. No KV cache yet: each step reruns the cropped context (fine for small models).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "xtrain/models/gpt.h"

namespace xtrain::models {

// Returns the n new token ids (not the prompt). temperature > 0; top_k 0 = no top-k, top_k 1 =
// greedy. Runs under no_grad in eval mode and restores the model's training flag afterwards.
// The same seed gives the same tokens on any device (sampling happens on the CPU).
std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                              int64_t top_k, uint64_t seed);
// Any model given as ids [1, T] -> the last position's logits [1, V] (a tensor- or pipeline-parallel
// GPT, whose forward every rank of its groups calls in step); `module` is put in eval mode.
using LastLogitsFn = std::function<at::Tensor(const at::Tensor& context)>;
std::vector<int64_t> generate(const LastLogitsFn& last_logits, torch::nn::Module& module, const ModelOptions& options,
                              const std::vector<int64_t>& prompt, int64_t n, double temperature, int64_t top_k,
                              uint64_t seed);
inline std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                                     int64_t top_k, uint64_t seed) {
  return generate(*model, prompt, n, temperature, top_k, seed);
}

}  // namespace xtrain::models
