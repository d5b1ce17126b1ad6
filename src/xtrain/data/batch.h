// One micro-batch as the engine sees it. Text: input and target are int64 [B, T] (target is input
// shifted by one). Images: input float32 [B, 1, 28, 28] normalised, target int64 [B].
#pragma once
#include <ATen/core/Tensor.h>

namespace xtrain::data {

struct Batch {
  at::Tensor input;
  at::Tensor target;
  int64_t size() const { return input.defined() ? input.size(0) : 0; }
};

}  // namespace xtrain::data
