// Quantisation parameters and the quantise/dequantise maps: activations uint8 per tensor,
// asymmetric (scale, zero point); weights int8 per output channel, symmetric (zero point 0).
// Design choice: PyTorch's arithmetic exactly (torch.ao.quantization observers' _calculate_qparams:
// float32 scale, eps floor, range widened to include 0, symmetric scale amax/127.5 over [-128, 127];
// rounding half to even of x·(1/scale) in float32, as PyTorch's quantize_val; ONNX's x / scale
// differs only when the two roundings straddle a tie), so fixtures compare bit for bit.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace xtrain::compress {

constexpr int64_t kU8Min = 0, kU8Max = 255;    // activations
constexpr int64_t kS8Min = -128, kS8Max = 127;  // weights

struct AffineQParams {
  float scale = 1.0f;
  int64_t zero_point = 0;
};

// PyTorch's per_tensor_affine qparams for [min, max] on [qmin, qmax] (range widened to include 0).
AffineQParams choose_affine_qparams(double min, double max, int64_t qmin = kU8Min, int64_t qmax = kU8Max);

// int8 symmetric per output channel (dim 0): scale[c] = max(amax_c / 127.5, eps), as
// PerChannelMinMaxObserver(qscheme=per_channel_symmetric, dtype=qint8).
struct PerChannelInt8 {
  at::Tensor q;      // int8, the weight's shape
  at::Tensor scale;  // float32 [C]
};
at::Tensor symmetric_scales(const at::Tensor& amax);  // float32 [C]
PerChannelInt8 quantize_per_channel(const at::Tensor& w);
PerChannelInt8 quantize_per_channel(const at::Tensor& w, const at::Tensor& scale);
at::Tensor dequantize_per_channel(const PerChannelInt8& q);  // float32

// uint8 per tensor: clamp(round_half_even(x · (1/scale)) + zero_point, 0, 255).
at::Tensor quantize_per_tensor(const at::Tensor& x, const AffineQParams& qp);
at::Tensor dequantize_per_tensor(const at::Tensor& q, const AffineQParams& qp);

}  // namespace xtrain::compress
