// Dense attention as a fused CPU kernel, flash-style: softmax(q·kᵀ/√HS (+ causal mask)) · v without
// materialising the T×T matrix (query blocks against key blocks, online softmax, backward from
// the log-sum-exp), on the shared tile engine (cpu/tile_engine.h). The fair dense baseline for the
// multi-scale kernel, and the registry's dense kernel for CPU. Reference: dense_reference.h;
// FlashAttention-2 (Dao 2023).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace xtrain::kernels::attention {

// q, k, v: [B, NH, T, HS], fp32/bf16/fp64 on the CPU, any strides. Returns [B, NH, T, HS] in the
// input dtype. dropout_p > 0 drops attention weights with the dropout_hash.h mask (seed: drawn
// from ATen's CPU generator when not given). Differentiable in q, k, v.
at::Tensor flash_attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                               double dropout_p = 0.0, std::optional<uint64_t> seed = std::nullopt);

}  // namespace xtrain::kernels::attention
