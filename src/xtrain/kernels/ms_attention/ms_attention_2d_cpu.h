// 2-D multi-scale attention over an image's patch grid (docs/design/multiscale-attention-2d.md) as
// a fused CPU kernel, forward and backward, on the shared tile engine (kernels/attention/cpu): the
// pooled 2^l x 2^l block levels are built once per call, each query block meets one key tile per
// (level, block row, side), online softmax across the tiles, nothing T x T formed. Design choice:
// queries are visited in strips of kStripWidth columns (row-major inside a strip) so that a query
// block is a compact rectangle of patches whose key sets overlap; q, the output and dq are
// permuted to that order and back (O(T·HS)). Reference: reference_2d.h (the dense masked spec).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace xtrain::kernels::ms_attention {

// q, k, v: [B, NH, T, HS] with T = gh·gw (+1: a class token, token 0), fp32/bf16/fp64 on the CPU,
// any strides; heads split among `windows` as windows.h says. Returns [B, NH, T, HS] in the input
// dtype, differentiable in q, k, v (analytic backward). dropout_p > 0 drops attention weights with
// the dropout_hash.h mask (query = position in the strip order, row = key row of the kernel's
// layout: tokens, then levels 1..; seed from ATen's CPU generator when not given).
at::Tensor ms_attention_2d_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::vector<int64_t>& windows, int64_t gh, int64_t gw, bool cls_token,
                               double dropout_p = 0.0, std::optional<uint64_t> seed = std::nullopt);

// The grid checks every 2-D kernel makes (CPU and CUDA): q's T is gh·gw (+1 with a class token),
// the grid is at least 1x1, dropout is in [0, 1). UsageError naming the setting otherwise.
void check_grid_call(const at::Tensor& q, int64_t gh, int64_t gw, bool cls_token, double dropout_p);

// The strip order: position i of the kernel's query order holds token strip_order(...)[i].
std::vector<int64_t> strip_order_2d(int64_t gh, int64_t gw, bool cls_token, int64_t strip_width);

// Queries per block and strip width (the planner's choice; exposed for the benchmark's notes).
constexpr int64_t kQueryBlock2d = 32;
constexpr int64_t kStripWidth2d = 8;

}  // namespace xtrain::kernels::ms_attention
