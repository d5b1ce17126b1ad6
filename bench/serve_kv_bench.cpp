// Per-token cost of decoding with the KV cache (models/kv_cache.h) against recomputing the whole
// context (the path `xtrain generate` took before), for the default GPT (4 layers, d_model 256,
// 4 heads, context 256) with dense and with multi-scale attention. Both paths first check that they
// give the same logits; then each decodes the positions [from, 256) after a prefill of `from`
// tokens, and the ratio is recompute / cached per token.
//   build/bench/bench_serve_kv_bench [from=192] [reps=3]
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/tensor.h>
#include <torch/utils.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "xtrain/models/gpt.h"
#include "xtrain/models/kv_cache.h"

using namespace xtrain::models;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per token: cached steps over [from, T), and full forwards of the same contexts.
std::pair<double, double> measure(GPT& gpt, const std::vector<int64_t>& tokens, int64_t from, double* max_err) {
  const int64_t T = gpt->options().seq_len;
  auto decoder = make_gpt_decoder(gpt.ptr());
  auto state = decoder->start();
  decoder->prefill(*state, std::vector<int64_t>(tokens.begin(), tokens.begin() + from));
  std::vector<at::Tensor> cached;
  double t0 = now();
  for (int64_t t = from; t < T; ++t) cached.push_back(decoder->step({state.get()}, {tokens[t]})[0]);
  const double cached_s = (now() - t0) / static_cast<double>(T - from);
  t0 = now();
  std::vector<at::Tensor> full;
  for (int64_t t = from; t < T; ++t) {
    const auto idx = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.begin() + t + 1), at::kLong).view({1, -1});
    full.push_back(gpt->head(gpt->hidden(idx).select(1, t)));
  }
  const double full_s = (now() - t0) / static_cast<double>(T - from);
  for (size_t i = 0; i < full.size(); ++i) {
    *max_err = std::max(*max_err, (cached[i] - full[i][0]).abs().max().item<double>());
  }
  return {cached_s, full_s};
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t from = argc > 1 ? std::atoll(argv[1]) : 192;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  at::NoGradGuard no_grad;
  std::printf("KV cache vs recompute, GPT 4 x 256, 4 heads, context 256, positions [%lld, 256), best of %d\n",
              static_cast<long long>(from), reps);
  for (const char* attention : {"dense", "multiscale"}) {
    ModelOptions o;  // the defaults: 4 layers, d_model 256, 4 heads, seq_len 256, vocab 256
    o.attention.type = attention;
    torch::manual_seed(1);
    GPT gpt(o);
    gpt->eval();
    const auto r = at::randint(o.vocab, {o.seq_len}, at::kLong);
    const std::vector<int64_t> tokens(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + o.seq_len);
    double err = 0, best_cached = 1e9, best_full = 1e9;
    measure(gpt, tokens, from, &err);  // warm-up
    for (int i = 0; i < reps; ++i) {
      const auto [c, f] = measure(gpt, tokens, from, &err);
      best_cached = std::min(best_cached, c), best_full = std::min(best_full, f);
    }
    std::printf("%-10s  cached %.3f ms/token  recompute %.3f ms/token  ratio %.1fx  (largest logit difference %.2e)\n",
                attention, best_cached * 1e3, best_full * 1e3, best_full / best_cached, err);
    if (err > 1e-3) {
      std::printf("FAIL: the cached logits differ from the full forward\n");
      return 1;
    }
  }
  return 0;
}
