// VocabParallelEmbedding: the out-of-range ids are mapped to row 0 for the lookup and their rows
// zeroed after it (a multiply by the in-range mask, so their gradient is zero too).
#include "xtrain/parallel/tensor/vocab_parallel_embedding.h"

#include <ATen/ops/embedding.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/nn/embedding.h"

namespace xtrain::parallel::tensor {

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(int64_t vocab, int64_t dim, CommPtr tp)
    : tp_(std::move(tp)), vocab_(vocab) {
  const int64_t size = tp_ ? tp_->size() : 1, rank = tp_ ? tp_->rank() : 0;
  XTRAIN_USAGE_CHECK(vocab % size == 0, "parallel: tensor_parallel.size (", size, ") must divide the vocabulary (",
                     vocab, ")");
  const int64_t n = vocab / size;
  first_ = rank * n;
  nn::Embedding full(vocab, dim);  // the single-rank init, same generator draws
  weight = register_parameter("weight", full->weight.detach().narrow(0, first_, n).clone());
}

at::Tensor VocabParallelEmbeddingImpl::forward(const at::Tensor& idx) {
  TORCH_CHECK(idx.scalar_type() == at::kLong, "parallel: embedding ids must be int64, got ", idx.scalar_type());
  const int64_t n = weight.size(0);
  if (n == vocab_) return at::embedding(weight, idx);
  const at::Tensor local = idx - first_;
  const at::Tensor in_range = local.ge(0).logical_and(local.lt(n));
  const at::Tensor rows = at::embedding(weight, local.masked_fill(in_range.logical_not(), 0));
  return reduce_from_tensor_parallel(rows * in_range.unsqueeze(-1).to(rows.scalar_type()), tp_);
}

}  // namespace xtrain::parallel::tensor
