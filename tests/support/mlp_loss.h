// A two-layer tanh MLP over named flat parameters (fc1.weight, fc1.bias, fc2.weight, fc2.bias, …),
// with a mean-squared-error loss: the model of the engine-level ZeRO tests.
// make_mlp_loss and smooth_batch build its parameters and batches from sines and cosines, without an
// RNG, so every rank and every run of a test builds the same ones.
#pragma once
#include <ATen/Functions.h>
#include <c10/util/accumulate.h>

#include <string>
#include <utility>
#include <vector>

#include "xtrain/data/batch.h"
#include "xtrain/zero/flat_layout.h"

namespace xtrain::testing {

struct MlpLoss {
  zero::NamedParams params;  // [fc1.weight, fc1.bias, fc2.weight, fc2.bias, extra…]
  at::Tensor loss(const data::Batch& b) const {
    auto h = at::tanh(at::linear(b.input, params[0].second, params[1].second));
    auto out = at::linear(h, params[2].second, params[3].second);
    return (out.to(at::kFloat) - b.target).pow(2).mean();
  }
};

// Element k of the j-th tensor: amp · sin(freq · k + seed_j), seed_0 = seed, seed_j+1 = seed_j + seed_step.
struct SmoothInit {
  double freq = 0.71, amp = 0.4, seed = 0.3, seed_step = 1.1;
};

inline MlpLoss make_mlp_loss(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes,
                             const SmoothInit& init = {}) {
  MlpLoss m;
  double seed = init.seed;
  for (const auto& [name, shape] : shapes) {
    const int64_t n = c10::multiply_integers(shape);
    auto t = (at::arange(n, at::kDouble) * init.freq + seed).sin().mul(init.amp).to(at::kFloat).view(shape);
    m.params.emplace_back(name, t.requires_grad_(true));
    seed += init.seed_step;
  }
  return m;
}

// Samples first … first + count - 1: input cos(i · (1 … in) · x_freq), target sin(i · (1 … out) · y_freq).
inline data::Batch smooth_batch(int64_t first, int64_t count, int64_t in, int64_t out, double x_freq = 0.13,
                                double y_freq = 0.05) {
  auto i = at::arange(first, first + count, at::kDouble).unsqueeze(1);
  auto x = (i * at::arange(1, in + 1, at::kDouble) * x_freq).cos();
  auto y = (i * at::arange(1, out + 1, at::kDouble) * y_freq).sin();
  return {x.to(at::kFloat), y.to(at::kFloat)};
}

}  // namespace xtrain::testing
