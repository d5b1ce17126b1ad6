// Fake quantisation for quantisation-aware training: quantise and dequantise in the forward pass,
// pass the gradient straight through where the value was inside the quantised range (Bengio et al.
// 2013's straight-through estimator; zero outside, where the clamp saturated). The arithmetic of
// torch.fake_quantize_per_tensor_affine / _per_channel_affine: q = round_half_even(x·(1/s)) + z.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace xtrain::compress {

// Per tensor (activations): scale, zero point, [qmin, qmax].
at::Tensor fake_quantize_per_tensor(const at::Tensor& x, float scale, int64_t zero_point, int64_t qmin, int64_t qmax);

// Per channel along dim 0 (weights), zero points 0, [qmin, qmax]; `scale` float32 [C] (no gradient).
at::Tensor fake_quantize_per_channel(const at::Tensor& w, const at::Tensor& scale, int64_t qmin, int64_t qmax);

}  // namespace xtrain::compress
