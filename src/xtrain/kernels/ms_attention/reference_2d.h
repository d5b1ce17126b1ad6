// The dense masked float64-capable reference of 2-D multi-scale attention over an image's patch
// grid: the executable form of docs/design/multiscale-attention-2d.md. Every level's pooled blocks
// concatenated row-major per level (then the class token's key, if any), a boolean visibility mask
// from ms_rules_2d.h, the log(size) bias, one ordinary softmax per head group, ordinary autograd.
// O(T²) memory on purpose; fused kernels are tested against it, and it is tested against
// tests/reference/gen_ms_attention_2d.py (PyTorch, per-query loops).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace xtrain::kernels::ms_attention {

// [T, K] bool with T = gh·gw (+1 with a class token, token 0) and K = total_blocks_2d(gh, gw) (+1,
// the class token's key, last): query t sees key j.
at::Tensor visibility_mask_2d(int64_t gh, int64_t gw, int64_t window, bool cls_token);

// [..., gh·gw, d] patches (row-major) -> [..., total_blocks_2d(gh, gw), d]: every level's block means.
at::Tensor pool_levels_2d_reference(const at::Tensor& x, int64_t gh, int64_t gw);

// [K]: log(size) of every key (0 for the class token's), in `like`'s dtype and device.
at::Tensor key_log_sizes_2d(int64_t gh, int64_t gw, bool cls_token, const at::Tensor& like);

// q, k, v: [B, NH, T, HS], T = gh·gw + (cls_token ? 1 : 0); windows split over heads as in 1-D.
at::Tensor ms_attention_2d_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const std::vector<int64_t>& windows, int64_t gh, int64_t gw,
                                     bool cls_token);

}  // namespace xtrain::kernels::ms_attention
