// The routed GEMM against float64 ATen (an independent reference): both backends, every transpose
// through strides, bias, alpha, beta accumulation, a broadcast additive mask, batched 4-D views
// strided into a fused buffer (the attention layout), bf16 inputs with fp32 and bf16 outputs, and
// the routing controls.
#include "xtrain/kernels/gemm.h"

#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/fixtures.h"

namespace xtrain::kernels::gemm_test {
namespace {

using xtrain::testing::expect_close;

struct ForceBackend {  // forces a backend for the scope
  explicit ForceBackend(GemmBackend b) : saved_(forced_gemm_backend()) { set_gemm_backend(b); }
  ~ForceBackend() { set_gemm_backend(saved_); }
  GemmBackend saved_;
};

const GemmBackend kBackends[] = {GemmBackend::kOneDnn, GemmBackend::kAten, GemmBackend::kAuto};

// fp32 sums of K products of N(0,1) values: rounding error grows like √K·2^-24·|terms|; 2e-5
// relative with a 1e-5·√K floor holds for K <= 512 with a wide margin and fails on a wrong term.
double fp32_atol(int64_t K) { return 1e-5 * std::sqrt(static_cast<double>(K)); }

at::Tensor ref(const at::Tensor& a, const at::Tensor& b) { return at::matmul(a.to(at::kDouble), b.to(at::kDouble)); }

TEST(Gemm, EveryTransposeThroughStridesMatchesFloat64) {
  torch::manual_seed(0);
  const int64_t M = 37, K = 70, N = 29;
  for (auto backend : kBackends) {
    ForceBackend force(backend);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const auto a = ta ? at::randn({K, M}).t() : at::randn({M, K});
        const auto b = tb ? at::randn({N, K}).t() : at::randn({K, N});
        const auto what = c10::str("backend ", static_cast<int>(backend), " ta ", ta, " tb ", tb);
        expect_close(gemm(a, b), ref(a, b), 2e-5, fp32_atol(K), what);
      }
    }
  }
}

TEST(Gemm, BiasAlphaBetaAndBroadcastAddMatchFloat64) {
  torch::manual_seed(1);
  const int64_t M = 16, K = 48, N = 24;
  const auto a = at::randn({M, K}), b = at::randn({N, K}).t(), bias = at::randn({N});
  const auto mask = at::randn({M, N});
  for (auto backend : kBackends) {
    ForceBackend force(backend);
    GemmArgs with_bias;
    with_bias.bias = bias;
    expect_close(gemm(a, b, with_bias), ref(a, b) + bias.to(at::kDouble), 2e-5, fp32_atol(K), "bias");
    GemmArgs scaled;
    scaled.alpha = 0.125;
    scaled.add = mask;
    expect_close(gemm(a, b, scaled), 0.125 * ref(a, b) + mask.to(at::kDouble), 2e-5, fp32_atol(K), "alpha + add");
    auto c = at::randn({M, N});
    const auto c0 = c.to(at::kDouble);
    GemmArgs acc;
    acc.beta = 1.0;
    gemm_out(c, a, b, acc);
    expect_close(c, c0 + ref(a, b), 2e-5, fp32_atol(K), "beta = 1");
  }
}

TEST(Gemm, BatchedViewsStridedIntoAFusedBufferMatchFloat64) {
  torch::manual_seed(2);
  const int64_t B = 2, T = 12, NH = 3, HS = 8, C = NH * HS;
  const auto qkv = at::randn({B, T, 3 * C});
  auto head = [&](const at::Tensor& t, int64_t i) { return t.narrow(2, i * C, C).view({B, T, NH, HS}).transpose(1, 2); };
  const auto q = head(qkv, 0), k = head(qkv, 1), v = head(qkv, 2);
  const auto mask = at::full({T, T}, -1e4).triu_(1);
  for (auto backend : kBackends) {
    ForceBackend force(backend);
    GemmArgs score;
    score.alpha = 0.25;
    score.add = mask;
    auto S = at::empty({B, NH, T, T});
    gemm_out(S, q, k.transpose(2, 3), score);
    expect_close(S, 0.25 * ref(q, k.transpose(2, 3)) + mask.to(at::kDouble), 2e-5, fp32_atol(HS), "q·kᵀ");
    // Written into the middle third of a fused [B, T, 3C] output, the rest untouched.
    auto out = at::zeros({B, T, 3 * C});
    gemm_out(head(out, 1), S.softmax(-1), v);
    expect_close(head(out, 1), ref(S.softmax(-1), v), 2e-5, fp32_atol(T), "P·v into a strided slot");
    EXPECT_EQ(out.narrow(2, 0, C).abs().max().item<double>(), 0.0);
    EXPECT_EQ(out.narrow(2, 2 * C, C).abs().max().item<double>(), 0.0);
  }
}

TEST(Gemm, BroadcastBatchDims) {
  torch::manual_seed(3);
  const auto a = at::randn({3, 1, 5, 7}), b = at::randn({1, 4, 7, 6});
  for (auto backend : kBackends) {
    ForceBackend force(backend);
    expect_close(gemm(a, b), ref(a, b), 2e-5, fp32_atol(7), "broadcast batch");
  }
}

TEST(Gemm, Bf16InputsWithFp32AndBf16Outputs) {
  torch::manual_seed(4);
  const int64_t M = 33, K = 64, N = 40;
  const auto a = at::randn({M, K}).to(at::kBFloat16), b = at::randn({N, K}).to(at::kBFloat16).t();
  const auto exact = ref(a, b);  // bf16 products are exact in fp32 and float64
  for (auto backend : kBackends) {
    ForceBackend force(backend);
    // fp32 output: only the fp32 accumulation rounds.
    expect_close(gemm(a, b, {}, at::kFloat), exact, 2e-5, fp32_atol(K), "bf16 -> fp32");
    // bf16 output: one final rounding to 8 bits of mantissa (relative 2^-8), plus accumulation.
    expect_close(gemm(a, b).to(at::kFloat), exact, 4e-3, 1e-2, "bf16 -> bf16");
  }
}

TEST(Gemm, RejectsLayoutsAndDtypesItCannotTake) {
  const auto a = at::randn({4, 8}), b = at::randn({8, 4});
  EXPECT_THROW(gemm(a.to(at::kDouble), b.to(at::kDouble)), c10::Error);
  EXPECT_THROW(gemm(a, b.to(at::kBFloat16)), c10::Error);
  EXPECT_THROW(gemm(at::randn({4, 16}).slice(1, 0, 16, 2), b), c10::Error);  // no unit stride
  EXPECT_THROW(gemm(a, at::randn({7, 4})), c10::Error);
  EXPECT_FALSE(gemm_supports(a.to(at::kDouble), b.to(at::kDouble)));
}

TEST(Gemm, RoutingResolvesToABackendAndCanBeForced) {
  ASSERT_EQ(forced_gemm_backend(), GemmBackend::kAuto) << "XTRAIN_GEMM is set in the test environment";
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t n : {8, 128, 1024}) EXPECT_NE(gemm_backend_for(dtype, 1, n, n, n), GemmBackend::kAuto);
  }
  {
    ForceBackend force(GemmBackend::kAten);
    EXPECT_EQ(gemm_backend_for(at::kFloat, 1, 512, 512, 512), GemmBackend::kAten);
  }
  EXPECT_EQ(gemm_backend_for(at::kBFloat16, 1, 64, 64, 64), GemmBackend::kOneDnn);  // by table
  // One decision per dtype: every fp32 shape goes the same way (runs stay bit-reproducible).
  EXPECT_EQ(gemm_backend_for(at::kFloat, 1, 8, 8, 8), gemm_backend_for(at::kFloat, 12, 2048, 768, 3072));
  const auto report = gemm_routing_report(true);
  EXPECT_NE(report.find("gemm fp32: onednn"), std::string::npos) << report;
  EXPECT_NE(report.find("gemm bf16: onednn"), std::string::npos) << report;
}

}  // namespace
}  // namespace xtrain::kernels::gemm_test
