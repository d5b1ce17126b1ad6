// The int8 GEMM and layers against naive references: the int32 accumulators of every path equal an
// int64 triple loop exactly (u8×s8 sums are exact in int32 for these K), the float outputs equal
// an fp32 computation on the dequantised values, and im2col-based Conv2d equals at::conv2d on the
// dequantised input and weights.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/fixtures.h"
#include "xtrain/compress/quant/int8_gemm.h"
#include "xtrain/compress/quant/int8_layers.h"
#include "xtrain/compress/quant/qparams.h"

namespace xtrain::compress::int8_gemm_test {
namespace {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;

at::Tensor naive_acc(const at::Tensor& A, const at::Tensor& W) {  // uint8 [M, >=K], int8 [N, K]
  const int64_t K = W.size(1);
  return at::mm(A.narrow(1, 0, K).to(at::kLong), W.to(at::kLong).t()).to(at::kInt);
}

TEST(Int8Gemm, AccumulatorsAreExactForAllShapes) {
  at::manual_seed(3);
  // Tails in every direction: M not a multiple of 6, N of 16/64, K of 4; extreme values included.
  for (auto [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {5, 17, 3}, {7, 64, 64}, {13, 70, 129}, {100, 130, 576}, {6, 10, 4608}}) {
    auto A = at::randint(0, 256, {M, round_up4(K)}, at::kByte);
    auto W = at::randint(-128, 128, {N, K}, at::kChar);
    A.select(0, 0).fill_(255);
    W.select(0, 0).fill_(-128);  // the largest |product| sum: 255·128·K
    const auto packed = pack_int8_weight(W);
    expect_equal(int8_gemm_accumulators(A, packed), naive_acc(A, W), c10::str("acc ", M, "x", N, "x", K));
  }
}

TEST(Int8Gemm, FloatEpilogueMatchesDequantisedReference) {
  at::manual_seed(4);
  const int64_t M = 33, N = 40, K = 72;
  const auto x = at::randn({M, K}) * 2 + 0.5;
  const auto w = at::randn({N, K}) * 0.1;
  const auto b = at::randn({N});
  const auto act = choose_affine_qparams(x.min().item<double>(), x.max().item<double>());
  for (bool relu : {false, true}) {
    const Int8Linear layer(w, b, act, /*dynamic=*/false, relu);
    const auto xd = dequantize_per_tensor(quantize_per_tensor(x, act), act);
    auto ref = at::linear(xd.to(at::kDouble), dequantize_per_channel(layer.weight()).to(at::kDouble),
                          b.to(at::kDouble));
    if (relu) ref = ref.relu();
    // One fp32 rounding of the exact integer sum times s_a·s_w, plus the bias add: a few ulps.
    expect_close(layer.forward(x), ref.to(at::kFloat), 1e-5, 1e-5, relu ? "linear+relu" : "linear");
  }
}

TEST(Int8Gemm, ConvMatchesDequantisedConv) {
  at::manual_seed(5);
  for (auto [cin, cout, k, stride, pad] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>>{
           {1, 8, 3, 1, 1}, {5, 20, 3, 2, 1}, {16, 33, 1, 2, 0}}) {
    const auto x = at::randn({3, cin, 9, 7});
    const auto w = at::randn({cout, cin, k, k}) * 0.2;
    const auto b = at::randn({cout});
    const auto act = choose_affine_qparams(x.min().item<double>(), x.max().item<double>());
    const int64_t s[2] = {stride, stride}, p[2] = {pad, pad};
    const Int8Conv2d conv(w, b, s, p, act, /*relu=*/false);
    const auto xd = dequantize_per_tensor(quantize_per_tensor(x, act), act).to(at::kDouble);
    const auto ref = at::conv2d(xd, dequantize_per_channel(conv.weight()).to(at::kDouble), b.to(at::kDouble),
                                {stride, stride}, {pad, pad});
    // Same as above; padding holds the zero point, i.e. exactly 0.0 after dequantisation.
    expect_close(conv.forward(x).contiguous(), ref.to(at::kFloat), 1e-5, 1e-5,
                 c10::str("conv ", cin, "->", cout, " k", k, " s", stride));
  }
}

TEST(Int8Gemm, SaysWhichPathRuns) {
  const auto reason = int8_path_reason();
  EXPECT_NE(reason.find("int8:"), std::string::npos);
  if (std::getenv("XTRAIN_INT8") == nullptr) EXPECT_EQ(int8_path() == Int8Path::kVnni, cpu_has_avx512_vnni());
}

}  // namespace
}  // namespace xtrain::compress::int8_gemm_test
