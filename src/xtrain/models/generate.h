// Autoregressive sampling from a GPT (nanoGPT's generate): crop the context to seq_len, scale the
// last position's logits by 1/temperature, keep the top_k (and the top_p nucleus), sample with a
// CPU generator seeded by `seed`. A whole GPT decodes incrementally (kv_cache.h: the prompt once,
// then one position per token); other models rerun the cropped context per token.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "xtrain/models/gpt.h"

namespace xtrain::models {

// One sequence's sampling: the same settings and seed give the same tokens from the same logits
// (xtrain generate and xtrain serve share it). top_p 1 = off (then the generator's draws are
// exactly those of plain top-k sampling).
class TokenSampler {
 public:
  // temperature > 0, top_k >= 0 (0: off), top_p in (0, 1]; UsageError naming the setting otherwise.
  TokenSampler(int64_t vocab, double temperature, int64_t top_k, double top_p, uint64_t seed);
  int64_t next(const at::Tensor& logits);  // float [V] or [1, V] (not modified)

 private:
  int64_t V_, top_k_;
  double temperature_, top_p_;
  at::Generator generator_;
};

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
// The same tokens as generate(model, ...) without the KV cache: each step reruns the cropped context.
std::vector<int64_t> generate_recompute(GPTImpl& model, const std::vector<int64_t>& prompt, int64_t n,
                                        double temperature, int64_t top_k, uint64_t seed);
inline std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                                     int64_t top_k, uint64_t seed) {
  return generate(*model, prompt, n, temperature, top_k, seed);
}

}  // namespace xtrain::models
