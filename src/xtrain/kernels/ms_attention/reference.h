// The dense masked reference of multi-scale attention: the executable form of
// shared/design/multiscale-attention.md. Pooled levels concatenated [K(0); K(1); ...], a boolean
// visibility mask [T, rows] from the key-selection rules, the log(size) bias, one ordinary softmax,
// ordinary autograd. Slow on purpose (O(T²) memory) and exact by construction; every fused kernel
// is tested against it, and it is tested against tests/reference/gen_ms_attention.py (PyTorch).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace xtrain::kernels::ms_attention {

// [T, total_rows(T)] bool: query i sees pooled row r (rows numbered level by level, ms_rules.h).
at::Tensor visibility_mask(int64_t T, int64_t window, bool causal);

// [T, d]-shaped last two dims -> [..., total_rows(T), d]: every level's segment means, in ATen ops.
at::Tensor pool_levels_reference(const at::Tensor& x);

// [total_rows(T)]: log(size) of every pooled row, in `like`'s dtype and device.
at::Tensor row_log_sizes(int64_t T, const at::Tensor& like);

// q, k, v: [B, NH, T, HS] (any float dtype and device). dropout_p > 0 multiplies the weights by
// attention::dropout_factors for `seed` over the pooled rows: what the fused kernels do.
at::Tensor ms_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::vector<int64_t>& windows, bool causal, double dropout_p = 0.0,
                                  uint64_t seed = 0);

}  // namespace xtrain::kernels::ms_attention
