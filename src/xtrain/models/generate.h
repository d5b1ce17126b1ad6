// Autoregressive sampling from a GPT (nanoGPT's generate): crop the context to seq_len, scale the
// last position's logits by 1/temperature, keep the top_k, sample with a CPU generator seeded by
// `seed`. No KV cache yet: each step reruns the cropped context (fine for small models).
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/models/gpt.h"

namespace xtrain::models {

// Returns the n new token ids (not the prompt). temperature > 0; top_k 0 = no top-k, top_k 1 =
// greedy. Runs under no_grad in eval mode and restores the model's training flag afterwards.
// The same seed gives the same tokens on any device (sampling happens on the CPU).
std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                              int64_t top_k, uint64_t seed);
inline std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                                     int64_t top_k, uint64_t seed) {
  return generate(*model, prompt, n, temperature, top_k, seed);
}

}  // namespace xtrain::models
