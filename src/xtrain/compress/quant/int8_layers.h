// Quantised Linear and Conv2d for inference on the int8 GEMM (int8_gemm.h): weights int8 per
// output channel, activations uint8 per tensor (static: calibrated scale and zero point; dynamic:
// Linear only, the range of each input), bias and the output in float32 (what the next layer
// quantises again: the QDQ semantics of the ONNX export). out = (acc − z_a·Σ_k W[n,k])·s_a·s_w[n]
// + b[n] is one FMA per output. Conv2d: the input becomes uint8 NHWC once, im2col per chunk of
// output positions into a reused per-thread buffer, the output is channels-last float32.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "xtrain/compress/quant/int8_gemm.h"
#include "xtrain/compress/quant/qparams.h"

namespace xtrain::compress {

class Int8Linear {
 public:
  // weight float [N, K] (quantised here), bias [N] or undefined; `act` unused when dynamic.
  Int8Linear(const at::Tensor& weight, const at::Tensor& bias, const AffineQParams& act, bool dynamic, bool relu);
  Int8Linear(const PerChannelInt8& weight, const at::Tensor& bias, const AffineQParams& act, bool dynamic, bool relu);
  at::Tensor forward(const at::Tensor& x) const;  // float [..., K] -> float [..., N]

  const PerChannelInt8& weight() const { return wq_; }
  const at::Tensor& bias() const { return bias_; }
  const AffineQParams& act() const { return act_; }
  bool dynamic() const { return dynamic_; }

 private:
  void epilogue_for(const AffineQParams& act, at::Tensor& scale, at::Tensor& offset) const;
  PerChannelInt8 wq_;
  PackedInt8Weight packed_;
  at::Tensor bias_;  // float32 [N] (zeros without bias)
  AffineQParams act_;
  bool dynamic_, relu_;
  at::Tensor col_scale_, col_offset_;  // static: precomputed
};

class Int8Conv2d {
 public:
  // weight float [Cout, Cin, kh, kw] with any BatchNorm already folded; bias [Cout].
  Int8Conv2d(const at::Tensor& weight, const at::Tensor& bias, const int64_t stride[2], const int64_t padding[2],
             const AffineQParams& act, bool relu);
  at::Tensor forward(const at::Tensor& x) const;  // float [B, Cin, H, W] -> channels-last [B, Cout, OH, OW]

  const PerChannelInt8& weight() const { return wq_; }  // [Cout, Cin, kh, kw]
  const at::Tensor& bias() const { return bias_; }
  const AffineQParams& act() const { return act_; }

 private:
  PerChannelInt8 wq_;
  PackedInt8Weight packed_;  // K ordered (kh, kw, Cin), as the NHWC im2col rows
  at::Tensor bias_, col_scale_, col_offset_;
  AffineQParams act_;
  int64_t stride_[2], padding_[2];
  int64_t cin_, cout_, kh_, kw_;
  bool relu_;
};

// im2col of uint8 NHWC [B, H, W, C] for output positions [p0, p1) (p = (b·OH + oh)·OW + ow):
// rows of K4 bytes ordered (kh, kw, c), `pad` (the zero point) outside the image, 0 after K.
void im2col_u8(const uint8_t* x, int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, const int64_t stride[2],
               const int64_t padding[2], int64_t OH, int64_t OW, int64_t p0, int64_t p1, uint8_t pad, uint8_t* rows,
               int64_t K4);

}  // namespace xtrain::compress
