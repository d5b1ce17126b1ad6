// Int8Linear / Int8Conv2d: quantise the input, run the int8 GEMM, write float32 outputs.
#include "xtrain/compress/quant/int8_layers.h"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include <cstring>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/compress/quant/int8_gemm_vnni.h"

namespace xtrain::compress {

namespace {

at::Tensor bias_or_zeros(const at::Tensor& bias, int64_t N) {
  return bias.defined() ? bias.detach().to(at::kFloat).contiguous().clone() : at::zeros({N}, at::kFloat);
}

// col_scale = s_a·s_w, col_offset = b − z_a·rowsum·col_scale.
void make_epilogue(const AffineQParams& act, const at::Tensor& w_scale, const at::Tensor& row_sums,
                   const at::Tensor& bias, at::Tensor& scale, at::Tensor& offset) {
  scale = (w_scale * act.scale).contiguous();
  offset = (bias - row_sums.to(at::kFloat) * scale * static_cast<float>(act.zero_point)).contiguous();
}

AffineQParams dynamic_qparams(const at::Tensor& x) {
  const auto [lo, hi] = at::aminmax(x);
  return choose_affine_qparams(lo.item<double>(), hi.item<double>());
}

uint8_t* thread_buffer(size_t bytes) {
  thread_local std::vector<uint8_t> buf;  // kept: a fresh buffer per call would page-fault each time
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

}  // namespace

Int8Linear::Int8Linear(const at::Tensor& weight, const at::Tensor& bias, const AffineQParams& act, bool dynamic,
                       bool relu)
    : Int8Linear(quantize_per_channel(weight), bias, act, dynamic, relu) {}

Int8Linear::Int8Linear(const PerChannelInt8& weight, const at::Tensor& bias, const AffineQParams& act, bool dynamic,
                       bool relu)
    : wq_(weight), act_(act), dynamic_(dynamic), relu_(relu) {
  TORCH_CHECK(wq_.q.dim() == 2, "compress: Int8Linear weight must be [N, K], got ", wq_.q.sizes());
  packed_ = pack_int8_weight(wq_.q);
  bias_ = bias_or_zeros(bias, packed_.N);
  if (!dynamic_) make_epilogue(act_, wq_.scale, packed_.row_sums, bias_, col_scale_, col_offset_);
}

at::Tensor Int8Linear::forward(const at::Tensor& x) const {
  const int64_t K = packed_.K, N = packed_.N;
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == K, "compress: int8 linear expects [..., ", K, "], got ", x.sizes());
  const auto x2 = x.detach().to(at::kFloat).reshape({-1, K}).contiguous();
  const int64_t M = x2.size(0);
  AffineQParams act = act_;
  at::Tensor scale = col_scale_, offset = col_offset_;
  if (dynamic_) {
    act = dynamic_qparams(x2);
    make_epilogue(act, wq_.scale, packed_.row_sums, bias_, scale, offset);
  }
  auto a = at::empty({M, packed_.K4}, at::kByte);
  quantize_rows_u8(x2.data_ptr<float>(), M, K, K, act.scale, act.zero_point, a.data_ptr<uint8_t>(), packed_.K4);
  auto out = at::empty({M, N}, at::kFloat);
  int8_gemm(a.data_ptr<uint8_t>(), M, packed_.K4, packed_, scale.data_ptr<float>(), offset.data_ptr<float>(), relu_,
            out.data_ptr<float>(), N);
  auto shape = x.sizes().vec();
  shape.back() = N;
  return out.view(shape);
}

Int8Conv2d::Int8Conv2d(const at::Tensor& weight, const at::Tensor& bias, const int64_t stride[2],
                       const int64_t padding[2], const AffineQParams& act, bool relu)
    : act_(act), relu_(relu) {
  TORCH_CHECK(weight.dim() == 4, "compress: Int8Conv2d weight must be [Cout, Cin, kh, kw], got ", weight.sizes());
  cout_ = weight.size(0), cin_ = weight.size(1), kh_ = weight.size(2), kw_ = weight.size(3);
  for (int i = 0; i < 2; ++i) stride_[i] = stride[i], padding_[i] = padding[i];
  wq_ = quantize_per_channel(weight);
  packed_ = pack_int8_weight(wq_.q.permute({0, 2, 3, 1}).reshape({cout_, kh_ * kw_ * cin_}));
  bias_ = bias_or_zeros(bias, cout_);
  make_epilogue(act_, wq_.scale, packed_.row_sums, bias_, col_scale_, col_offset_);
}

at::Tensor Int8Conv2d::forward(const at::Tensor& x) const {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == cin_, "compress: int8 conv expects [B, ", cin_, ", H, W], got ", x.sizes());
  const int64_t B = x.size(0), H = x.size(2), W = x.size(3);
  const int64_t OH = (H + 2 * padding_[0] - kh_) / stride_[0] + 1, OW = (W + 2 * padding_[1] - kw_) / stride_[1] + 1;
  // uint8 NHWC input, one pass.
  const auto nhwc = x.detach().to(at::kFloat).permute({0, 2, 3, 1}).contiguous();
  auto xq = at::empty({B, H, W, cin_}, at::kByte);
  quantize_rows_u8(nhwc.data_ptr<float>(), B * H * W, cin_, cin_, act_.scale, act_.zero_point, xq.data_ptr<uint8_t>(),
                   cin_);
  const int64_t P = B * OH * OW, K4 = packed_.K4;
  auto out = at::empty({B, OH, OW, cout_}, at::kFloat);
  const uint8_t pad = static_cast<uint8_t>(act_.zero_point);
  const uint8_t* xp = xq.data_ptr<uint8_t>();
  float* op = out.data_ptr<float>();
  const float* cs = col_scale_.data_ptr<float>();
  const float* co = col_offset_.data_ptr<float>();
  if (int8_path() != Int8Path::kVnni) {  // one im2col for the whole batch, then the portable GEMM
    auto rows = at::empty({P, K4}, at::kByte);
    im2col_u8(xp, H, W, cin_, kh_, kw_, stride_, padding_, OH, OW, 0, P, pad, rows.data_ptr<uint8_t>(), K4);
    int8_gemm(rows.data_ptr<uint8_t>(), P, K4, packed_, cs, co, relu_, op, cout_);
    return out.permute({0, 3, 1, 2});
  }
  constexpr int64_t kChunk = 96;  // output positions per task: rows of A that stay in L2
  const int8_t* packed = packed_.packed.data_ptr<int8_t>();
  at::parallel_for(0, (P + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    uint8_t* rows = thread_buffer(static_cast<size_t>(kChunk * K4));
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t p0 = c * kChunk, p1 = std::min(P, p0 + kChunk);
      im2col_u8(xp, H, W, cin_, kh_, kw_, stride_, padding_, OH, OW, p0, p1, pad, rows, K4);
      vnni::gemm_rows(rows, 0, p1 - p0, K4, packed, cout_, K4, cs, co, relu_, op + p0 * cout_, cout_, nullptr);
    }
  });
  return out.permute({0, 3, 1, 2});  // logical NCHW, channels-last memory
}

void im2col_u8(const uint8_t* x, int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, const int64_t stride[2],
               const int64_t padding[2], int64_t OH, int64_t OW, int64_t p0, int64_t p1, uint8_t pad, uint8_t* rows,
               int64_t K4) {
  const int64_t K = kh * kw * C;
  for (int64_t p = p0; p < p1; ++p) {
    uint8_t* row = rows + (p - p0) * K4;
    const int64_t b = p / (OH * OW), oh = (p / OW) % OH, ow = p % OW;
    for (int64_t i = 0; i < kh; ++i) {
      const int64_t ih = oh * stride[0] - padding[0] + i;
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t iw = ow * stride[1] - padding[1] + j;
        uint8_t* dst = row + (i * kw + j) * C;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
          std::memset(dst, pad, static_cast<size_t>(C));
        } else {
          std::memcpy(dst, x + ((b * H + ih) * W + iw) * C, static_cast<size_t>(C));
        }
      }
    }
    if (K4 > K) std::memset(row + K, 0, static_cast<size_t>(K4 - K));
  }
}

}  // namespace xtrain::compress
