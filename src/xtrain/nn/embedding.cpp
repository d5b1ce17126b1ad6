// nn::Embedding over at::embedding.
#include "xtrain/nn/embedding.h"

#include <ATen/ops/embedding.h>
#include <ATen/ops/randn.h>

#include "xtrain/base/error.h"

namespace xtrain::nn {

EmbeddingImpl::EmbeddingImpl(int64_t num, int64_t dim) {
  XTRAIN_USAGE_CHECK(num > 0 && dim > 0, "nn: Embedding sizes must be > 0, got ", num, " x ", dim);
  weight = register_parameter("weight", at::randn({num, dim}));
}

at::Tensor EmbeddingImpl::forward(const at::Tensor& idx) { return at::embedding(weight, idx); }

}  // namespace xtrain::nn
