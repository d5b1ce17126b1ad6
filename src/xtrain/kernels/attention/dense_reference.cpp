// Dense attention in ATen ops (see dense_reference.h).
#include "xtrain/kernels/attention/dense_reference.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "xtrain/kernels/attention/dropout_hash.h"

namespace xtrain::kernels::attention {

namespace {

at::Tensor softmax_scores(const at::Tensor& q, const at::Tensor& k, bool causal) {
  const int64_t T = q.size(2);
  auto scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(3))));
  if (causal) {
    const auto future = at::ones({T, T}, q.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  return at::softmax(scores, -1);
}

}  // namespace

at::Tensor dense_attention_composite(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                     double dropout_p, bool training) {
  auto p = softmax_scores(q, k, causal);
  if (dropout_p > 0 && training) p = at::dropout(p, dropout_p, /*train=*/true);
  return at::matmul(p, v);
}

at::Tensor dense_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                     double dropout_p, uint64_t seed) {
  auto p = softmax_scores(q, k, causal);
  if (dropout_p > 0) p = p * dropout_factors(q.size(0), q.size(1), q.size(2), k.size(2), dropout_p, seed, p);
  return at::matmul(p, v);
}

uint64_t draw_dropout_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

at::Tensor dropout_factors(int64_t B, int64_t NH, int64_t T, int64_t rows, double p, uint64_t seed,
                           const at::Tensor& like) {
  auto f = at::empty({B, NH, T, rows}, like.options().dtype(at::kDouble).device(at::kCPU));
  double* out = f.data_ptr<double>();
  const uint32_t threshold = dropout_threshold(p);
  const double keep = 1.0 / (1.0 - p);
  for (int64_t s = 0; s < B * NH; ++s) {
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t r = 0; r < rows; ++r) {
        *out++ = dropout_keep(seed, static_cast<uint64_t>(s), static_cast<uint64_t>(i), static_cast<uint64_t>(r),
                              threshold)
                     ? keep
                     : 0.0;
      }
    }
  }
  return f.to(like.options());
}

}  // namespace xtrain::kernels::attention
