// Multi-scale attention (shared/design/multiscale-attention.md) as a fused CPU kernel, forward and
// backward: the pooled levels are built once per call, each query block meets one key tile per
// level and side (the union of its queries' segment ranges), online softmax across the tiles, and
// nothing of size T×T is ever formed: O(T·w·log(T/w)) time, O(T) extra memory. Runs on the shared
// tile engine (kernels/attention/cpu). Reference: reference.h (the dense masked spec).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace xtrain::kernels::ms_attention {

// q, k, v: [B, NH, T, HS], fp32/bf16/fp64 on the CPU, any strides; heads split among `windows` as
// windows.h says. Returns [B, NH, T, HS] in the input dtype. dropout_p > 0 drops attention weights
// with the dropout_hash.h mask over pooled rows (seed: from ATen's CPU generator when not given).
at::Tensor ms_attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::vector<int64_t>& windows, bool causal, double dropout_p = 0.0,
                            std::optional<uint64_t> seed = std::nullopt);

// Queries per block for a window (the tile planner's choice; exposed for the benchmark's notes).
int64_t ms_block_size(int64_t window);

}  // namespace xtrain::kernels::ms_attention
