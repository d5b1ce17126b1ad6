// generate(): one forward of the cropped context per token, the LM head on the last position only.
#include "xtrain/models/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/topk.h>

#include <algorithm>
#include <limits>

#include "xtrain/base/error.h"

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

void check_arguments(int64_t V, const std::vector<int64_t>& prompt, int64_t n, double temperature, int64_t top_k) {
  XTRAIN_USAGE_CHECK(!prompt.empty(), "generate: the prompt must have at least one token");
  for (int64_t t : prompt) {
    XTRAIN_USAGE_CHECK(t >= 0 && t < V, "generate: prompt token ", t, " is outside the vocabulary [0, ", V, ")");
  }
  XTRAIN_USAGE_CHECK(n >= 0, "generate: the number of tokens must be >= 0, got ", n);
  XTRAIN_USAGE_CHECK(temperature > 0, "generate: temperature must be > 0, got ", temperature,
                     " (use top_k=1 for greedy decoding)");
  XTRAIN_USAGE_CHECK(top_k >= 0, "generate: top_k must be >= 0 (0: off), got ", top_k);
}

}  // namespace

std::vector<int64_t> generate(const LastLogitsFn& last_logits, torch::nn::Module& module, const ModelOptions& options,
                              const std::vector<int64_t>& prompt, int64_t n, double temperature, int64_t top_k,
                              uint64_t seed) {
  const int64_t T_max = options.seq_len;
  const int64_t V = options.vocab;
  check_arguments(V, prompt, n, temperature, top_k);
  at::NoGradGuard no_grad;
  EvalScope eval(module);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);

  std::vector<int64_t> tokens = prompt;
  tokens.reserve(prompt.size() + n);
  for (int64_t step = 0; step < n; ++step) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(tokens.size()), T_max);
    const auto context = at::from_blob(tokens.data() + tokens.size() - T, {1, T}, at::kLong);
    auto logits = last_logits(context).to(at::kCPU, at::kFloat).div_(temperature);  // [1, V]
    if (top_k > 0 && top_k < V) {
      const auto kth = std::get<0>(at::topk(logits, top_k, -1)).narrow(-1, top_k - 1, 1);  // [1, 1]
      logits.masked_fill_(logits < kth, -std::numeric_limits<double>::infinity());
    }
    const auto probs = at::softmax(logits, -1);
    tokens.push_back(at::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>());
  }
  return std::vector<int64_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size()), tokens.end());
}

std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                              int64_t top_k, uint64_t seed) {
  const auto device = model.wte->weight.device();
  auto last_logits = [&model, device](const at::Tensor& context) {
    const int64_t T = context.size(1);
    return model.head(model.hidden(context.to(device)).select(1, T - 1));  // only the last position
  };
  return generate(last_logits, model, model.options(), prompt, n, temperature, top_k, seed);
}

}  // namespace xtrain::models
