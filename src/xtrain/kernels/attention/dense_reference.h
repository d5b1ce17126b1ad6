// Dense attention in plain LibTorch ops: softmax(q·kᵀ/√HS, causal mask) · v, O(T²) memory. Two
// uses: the registry's "dense_composite" kernel (and the benchmark's composite peer: matmul, mask,
// softmax, matmul), and the reference the fused dense kernel is tested against, which applies the
// fused kernels' own dropout mask (dropout_hash.h) so the two can be compared with dropout on.
// Reference: torch.nn.functional.scaled_dot_product_attention's math path; nanoGPT.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace xtrain::kernels::attention {

// q, k, v: [B, NH, T, HS] (any float dtype and device). Dropout via at::dropout when training.
at::Tensor dense_attention_composite(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                     double dropout_p, bool training);

// As above, with dropout by the dropout_hash.h mask for `seed` (row = key position): what
// flash_attention_cpu computes. Autograd through ATen ops; double-precision capable.
at::Tensor dense_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                     double dropout_p = 0.0, uint64_t seed = 0);

// A seed for the dropout hash from ATen's default CPU generator (so torch::manual_seed fixes it).
uint64_t draw_dropout_seed();

// [B, NH, T, rows] in `like`'s dtype: 1/(1-p) where dropout_hash.h keeps (query, row), else 0.
// Stream of head h of batch b: b*NH + h.
at::Tensor dropout_factors(int64_t B, int64_t NH, int64_t T, int64_t rows, double p, uint64_t seed,
                           const at::Tensor& like);

}  // namespace xtrain::kernels::attention
