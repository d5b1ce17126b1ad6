// generate(): the KV cache for a whole GPT; otherwise one forward of the cropped context per token,
// the LM head on the last position only. TokenSampler: nanoGPT's sampling, plus the top-p nucleus.
#include "xtrain/models/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/cumsum.h>

#include <algorithm>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/models/kv_cache.h"

namespace xtrain::models {

namespace {

// Eval mode for the scope; the caller's train/eval flag comes back even on an exception.
class EvalScope {
 public:
  explicit EvalScope(torch::nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~EvalScope() { m_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  torch::nn::Module& m_;
  bool was_training_;
};

void check_arguments(int64_t V, const std::vector<int64_t>& prompt, int64_t n) {
  XTRAIN_USAGE_CHECK(!prompt.empty(), "generate: the prompt must have at least one token");
  for (int64_t t : prompt) {
    XTRAIN_USAGE_CHECK(t >= 0 && t < V, "generate: prompt token ", t, " is outside the vocabulary [0, ", V, ")");
  }
  XTRAIN_USAGE_CHECK(n >= 0, "generate: the number of tokens must be >= 0, got ", n);
}

}  // namespace

TokenSampler::TokenSampler(int64_t vocab, double temperature, int64_t top_k, double top_p, uint64_t seed)
    : V_(vocab), top_k_(top_k), temperature_(temperature), top_p_(top_p),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  XTRAIN_USAGE_CHECK(temperature > 0, "generate: temperature must be > 0, got ", temperature,
                     " (use top_k=1 for greedy decoding)");
  XTRAIN_USAGE_CHECK(top_k >= 0, "generate: top_k must be >= 0 (0: off), got ", top_k);
  XTRAIN_USAGE_CHECK(top_p > 0 && top_p <= 1, "generate: top_p must be in (0, 1] (1: off), got ", top_p);
}

int64_t TokenSampler::next(const at::Tensor& row) {
  auto logits = row.reshape({1, V_}).to(at::kCPU, at::kFloat).div(temperature_);  // [1, V], a new tensor
  const double minus_inf = -std::numeric_limits<double>::infinity();
  if (top_k_ > 0 && top_k_ < V_) {
    const auto kth = std::get<0>(at::topk(logits, top_k_, -1)).narrow(-1, top_k_ - 1, 1);  // [1, 1]
    logits.masked_fill_(logits < kth, minus_inf);
  }
  if (top_p_ < 1) {
    // The nucleus: the most likely tokens until their mass reaches top_p (the one crossing it kept).
    const auto sorted = at::sort(logits, -1, /*descending=*/true);
    const auto p = at::softmax(std::get<0>(sorted), -1);
    const auto drop = (at::cumsum(p, -1) - p) > top_p_;
    logits.scatter_(-1, std::get<1>(sorted), std::get<0>(sorted).masked_fill(drop, minus_inf));
  }
  return at::multinomial(at::softmax(logits, -1), 1, /*replacement=*/false, generator_).item<int64_t>();
}

std::vector<int64_t> generate(const LastLogitsFn& last_logits, torch::nn::Module& module, const ModelOptions& options,
                              const std::vector<int64_t>& prompt, int64_t n, double temperature, int64_t top_k,
                              uint64_t seed) {
  const int64_t T_max = options.seq_len;
  check_arguments(options.vocab, prompt, n);
  TokenSampler sampler(options.vocab, temperature, top_k, 1.0, seed);
  at::NoGradGuard no_grad;
  EvalScope eval(module);
  std::vector<int64_t> tokens = prompt;
  tokens.reserve(prompt.size() + n);
  for (int64_t step = 0; step < n; ++step) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(tokens.size()), T_max);
    const auto context = at::from_blob(tokens.data() + tokens.size() - T, {1, T}, at::kLong);
    tokens.push_back(sampler.next(last_logits(context)));
  }
  return std::vector<int64_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size()), tokens.end());
}

std::vector<int64_t> generate_recompute(GPTImpl& model, const std::vector<int64_t>& prompt, int64_t n,
                                        double temperature, int64_t top_k, uint64_t seed) {
  const auto device = model.wte->weight.device();
  auto last_logits = [&model, device](const at::Tensor& context) {
    const int64_t T = context.size(1);
    return model.head(model.hidden(context.to(device)).select(1, T - 1));  // only the last position
  };
  return generate(last_logits, model, model.options(), prompt, n, temperature, top_k, seed);
}

std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                              int64_t top_k, uint64_t seed) {
  // ZeRO-3 keeps a block's parameters released (empty) outside its block runner, which only the
  // model's own forward calls: sample through it then.
  for (const auto& p : model.parameters()) {
    if (p.numel() == 0) return generate_recompute(model, prompt, n, temperature, top_k, seed);
  }
  check_arguments(model.options().vocab, prompt, n);
  TokenSampler sampler(model.options().vocab, temperature, top_k, 1.0, seed);
  at::NoGradGuard no_grad;
  EvalScope eval(model);
  // Non-owning: the caller keeps the model alive for the call.
  auto decoder = make_gpt_decoder(std::shared_ptr<GPTImpl>(std::shared_ptr<GPTImpl>(), &model));
  auto state = decoder->start();
  std::vector<int64_t> out;
  if (n == 0) return out;
  out.push_back(sampler.next(decoder->prefill(*state, prompt)));
  while (static_cast<int64_t>(out.size()) < n) out.push_back(sampler.next(decoder->step({state.get()}, {out.back()})));
  return out;
}

}  // namespace xtrain::models
