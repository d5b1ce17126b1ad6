// qparams: PyTorch's observer arithmetic in float32 scalars; the maps in ATen ops.
#include "xtrain/compress/quant/qparams.h"

#include <ATen/Functions.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "xtrain/base/error.h"

namespace xtrain::compress {

namespace {
constexpr float kEps = std::numeric_limits<float>::epsilon();  // torch.finfo(torch.float32).eps
}

AffineQParams choose_affine_qparams(double min, double max, int64_t qmin, int64_t qmax) {
  TORCH_CHECK(std::isfinite(min) && std::isfinite(max) && min <= max, "compress: activation range must be finite with ",
              "min <= max, got [", min, ", ", max, "]");
  const float min_neg = std::min(static_cast<float>(min), 0.0f);
  const float max_pos = std::max(static_cast<float>(max), 0.0f);
  AffineQParams qp;
  qp.scale = std::max((max_pos - min_neg) / static_cast<float>(qmax - qmin), kEps);
  const float zp = static_cast<float>(qmin) - std::nearbyint(min_neg / qp.scale);
  qp.zero_point = std::clamp<int64_t>(static_cast<int64_t>(zp), qmin, qmax);
  return qp;
}

at::Tensor symmetric_scales(const at::Tensor& amax) {
  return (amax.to(at::kFloat) / static_cast<float>((kS8Max - kS8Min) / 2.0)).clamp_min(kEps);
}

PerChannelInt8 quantize_per_channel(const at::Tensor& w) {
  TORCH_CHECK(w.dim() >= 1 && w.size(0) > 0, "compress: per-channel quantisation needs a weight with dim 0, got ",
              w.sizes());
  const auto flat = w.detach().to(at::kFloat).reshape({w.size(0), -1});
  return quantize_per_channel(w, symmetric_scales(flat.abs().amax(1)));
}

PerChannelInt8 quantize_per_channel(const at::Tensor& w, const at::Tensor& scale) {
  const auto flat = w.detach().to(at::kFloat).reshape({w.size(0), -1});
  const auto inv = scale.reciprocal().unsqueeze(1);  // x · (1/scale), as PyTorch's quantize_val
  const auto q = at::round(flat * inv).clamp_(kS8Min, kS8Max).to(at::kChar);
  return {q.view(w.sizes()), scale};
}

at::Tensor dequantize_per_channel(const PerChannelInt8& q) {
  const auto flat = q.q.reshape({q.q.size(0), -1}).to(at::kFloat) * q.scale.unsqueeze(1);
  return flat.view(q.q.sizes());
}

at::Tensor quantize_per_tensor(const at::Tensor& x, const AffineQParams& qp) {
  // at::round rounds half to even (std::nearbyint), as torch.round and ONNX QuantizeLinear.
  const float inv = 1.0f / qp.scale;
  return at::round(x.detach().to(at::kFloat) * inv).add_(static_cast<double>(qp.zero_point))
      .clamp_(kU8Min, kU8Max).to(at::kByte);
}

at::Tensor dequantize_per_tensor(const at::Tensor& q, const AffineQParams& qp) {
  return (q.to(at::kFloat) - static_cast<float>(qp.zero_point)) * qp.scale;
}

}  // namespace xtrain::compress
