// Multi-scale attention on CUDA: the tensor side of ms_attention_kernel.cu (checks, pooled level
// buffers, the current stream, every launch checked, autograd). Same contract as
// ms_attention_cpu.h; the registry offers it as "ms_fused_cuda". Compiled only with a CUDA
// LibTorch (XTRAIN_WITH_CUDA). Untested on hardware in the session that wrote it:
// bench/gpu/ms_attention_check.sh compares it with the reference on a lent GPU.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace xtrain::kernels::ms_attention {

// q, k, v: [B, NH, T, HS] on one GPU, fp32/bf16/fp16, HS <= 256, at most 16 windows.
at::Tensor ms_attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::vector<int64_t>& windows, bool causal, double dropout_p = 0.0,
                             std::optional<uint64_t> seed = std::nullopt);

// Whether the kernel takes this head size and dtype (the registry's supports()).
bool cuda_supports(int64_t HS, c10::ScalarType dtype);

}  // namespace xtrain::kernels::ms_attention
