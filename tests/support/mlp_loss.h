// A two-layer tanh MLP over named flat parameters (fc1.weight, fc1.bias, fc2.weight, fc2.bias, …),
// with a mean-squared-error loss: the model of the engine-level ZeRO tests.
#pragma once
#include <ATen/Functions.h>

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

}  // namespace xtrain::testing
