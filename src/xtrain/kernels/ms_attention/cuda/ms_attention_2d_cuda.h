// 2-D multi-scale attention on CUDA: the tensor side of ms_attention_2d_kernel.cu (checks, key-row
// buffers, the current stream, every launch checked, autograd). Same contract as
// ms_attention_2d_cpu.h (the same dropout mask); the registry offers it as "ms2d_fused_cuda".
// Compiled only with a CUDA LibTorch (XTRAIN_WITH_CUDA). Untested on hardware in the session that
// wrote it (no GPU was lent; nvcc compile-checks the kernels in every build).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace xtrain::kernels::ms_attention {

// q, k, v: [B, NH, T, HS] on one GPU, T = gh·gw (+1: class token), fp32/bf16/fp16, HS <= 256, at
// most 16 windows (cuda_supports() in ms_attention_cuda.h says which head sizes and dtypes).
at::Tensor ms_attention_2d_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const std::vector<int64_t>& windows, int64_t gh, int64_t gw, bool cls_token,
                                double dropout_p = 0.0, std::optional<uint64_t> seed = std::nullopt);

}  // namespace xtrain::kernels::ms_attention
