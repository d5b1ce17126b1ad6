// Dense attention and the kernel registry. The dense reference equals PyTorch
// (tests/reference/gen_ms_attention.py, dense cases); the fused flash-style CPU kernel equals the
// reference (forward and gradients, fp32/bf16/fp64, causal and bidirectional, with dropout);
// the registry picks by priority and supports(), runs a user's kernel, and explains failures.
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "support/errors.h"
#include "kernels/attention/attention_checks.h"
#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/dense_reference.h"
#include "xtrain/kernels/attention/flash_cpu.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/ms_attention/reference.h"

namespace xtrain::kernels::attention::attention_test {
namespace {

using xtrain::testing::AttentionResult;
using xtrain::testing::expect_result;
using xtrain::testing::run_with_grads;

TEST(DenseReference, MatchesPyTorchFixture) {
  const auto fx = xtrain::testing::load_tensors("ms_attention.pt");
  for (const std::string name : {"dense_causal", "dense_bidir"}) {
    const auto get = [&](const std::string& key) { return fx.at(name + "/" + key); };
    const bool causal = get("meta")[0].item<int64_t>() != 0;
    const auto got = run_with_grads(
        [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return dense_attention_reference(q, k, v, causal);
        },
        get("q"), get("k"), get("v"), get("dout"));
    expect_result(got, {get("out"), get("dq"), get("dk"), get("dv")}, 1e-12, name);
    const auto flash = run_with_grads(
        [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return flash_attention_cpu(q, k, v, causal);
        },
        get("q"), get("k"), get("v"), get("dout"));
    expect_result(flash, {get("out"), get("dq"), get("dk"), get("dv")}, 1e-11, name + " flash");
  }
}

AttentionResult flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                      bool causal, double p = 0, uint64_t seed = 0) {
  return run_with_grads(
      [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return flash_attention_cpu(a, b, c, causal, p, seed);
      },
      q, k, v, dout);
}

AttentionResult reference_f64(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                              bool causal, double p = 0, uint64_t seed = 0) {
  return run_with_grads(
      [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return dense_attention_reference(a, b, c, causal, p, seed);
      },
      q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), dout.to(at::kDouble));
}

AttentionResult as_double(const AttentionResult& r) {
  return {r.out.to(at::kDouble), r.dq.to(at::kDouble), r.dk.to(at::kDouble), r.dv.to(at::kDouble)};
}

TEST(FlashCpu, Float32MatchesReference) {
  torch::manual_seed(11);
  // Around the 64-row tiles: 1, 2, 63, 64, 65, 129, 300; B = 2; HS = 24 (not a whole vector).
  for (int64_t n : {1, 2, 63, 64, 65, 129, 300}) {
    for (bool causal : {true, false}) {
      const auto q = at::randn({2, 3, n, 24}), k = at::randn({2, 3, n, 24}), v = at::randn({2, 3, n, 24});
      const auto dout = at::randn({2, 3, n, 24});
      // fp32 accumulation over up to 300 keys: a few 1e-6 relative.
      expect_result(as_double(flash(q, k, v, dout, causal)), reference_f64(q, k, v, dout, causal), 1e-5,
                    "n=" + std::to_string(n) + (causal ? " causal" : " bidir"));
    }
  }
}

TEST(FlashCpu, BFloat16AndDropout) {
  torch::manual_seed(12);
  const auto q = at::randn({1, 2, 150, 32}), k = at::randn({1, 2, 150, 32}), v = at::randn({1, 2, 150, 32});
  const auto dout = at::randn({1, 2, 150, 32});
  const auto bf = [](const at::Tensor& t) { return t.to(at::kBFloat16); };
  // bf16 rounding of outputs and dout: ~4e-3 relative.
  expect_result(as_double(flash(bf(q), bf(k), bf(v), bf(dout), true)),
                reference_f64(bf(q), bf(k), bf(v), bf(dout), true), 1e-2, "bf16");
  expect_result(as_double(flash(q, k, v, dout, true, 0.2, 99)), reference_f64(q, k, v, dout, true, 0.2, 99), 1e-5,
                "dropout");
}

TEST(FlashCpu, MultiThreadedChunksMatchReference) {
  torch::manual_seed(14);
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  const auto q = at::randn({1, 1, 517, 16}), k = at::randn({1, 1, 517, 16}), v = at::randn({1, 1, 517, 16});
  const auto dout = at::randn({1, 1, 517, 16});
  for (bool causal : {true, false}) {
    expect_result(as_double(flash(q, k, v, dout, causal)), reference_f64(q, k, v, dout, causal), 1e-5,
                  causal ? "threads=2 causal" : "threads=2 bidir");
  }
  at::set_num_threads(before);
}

TEST(FlashCpu, GradcheckFloat64) {
  torch::manual_seed(13);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  for (bool causal : {true, false}) {
    const auto q = at::randn({1, 2, 5, 3}, opts), k = at::randn({1, 2, 5, 3}, opts), v = at::randn({1, 2, 5, 3}, opts);
    xtrain::testing::gradcheck(
        [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
          return flash_attention_cpu(a, b, c, causal);
        },
        q, k, v, causal ? "causal" : "bidir");
  }
}

AttentionCall call_for(int64_t T, std::vector<int64_t> windows, at::ScalarType dtype = at::kFloat) {
  AttentionCall c;
  c.B = 2;
  c.NH = 4;
  c.T = T;
  c.HS = 16;
  c.dtype = dtype;
  c.windows = std::move(windows);
  return c;
}

std::string usage_error(const std::function<void()>& f) { return xtrain::testing::expect_usage_error(f); }

TEST(AttentionRegistry, AutoPicksTheFusedKernels) {
  EXPECT_EQ(select_attention_kernel("auto", call_for(512, {})), "dense_flash_cpu");
  EXPECT_EQ(select_attention_kernel("auto", call_for(512, {8, 16})), "ms_fused_cpu");
  EXPECT_EQ(select_attention_kernel("auto", call_for(512, {8, 16}, at::kDouble)), "ms_fused_cpu");
  EXPECT_EQ(select_attention_kernel("dense_composite", call_for(512, {})), "dense_composite");
  EXPECT_EQ(select_attention_kernel("ms_reference", call_for(512, {8})), "ms_reference");
  const auto names = attention_kernel_names();
  for (const std::string n : {"dense_composite", "dense_flash_cpu", "ms_reference", "ms_fused_cpu"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(AttentionRegistry, RunsAUserKernelAndExplainsFailures) {
  int calls = 0;
  // A user kernel: the reference, for T <= 64 only, preferred over everything built in.
  register_attention_kernel(
      "my_small_ms",
      [&calls](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        ++calls;
        return ms_attention::ms_attention_reference(q, k, v, c.windows, c.causal);
      },
      [](const AttentionCall& c) { return c.multiscale() && c.T <= 64; }, 100);
  EXPECT_EQ(select_attention_kernel("auto", call_for(64, {8})), "my_small_ms");
  EXPECT_EQ(select_attention_kernel("auto", call_for(65, {8})), "ms_fused_cpu");
  const auto x = at::randn({1, 2, 10, 4});
  const auto y = run_attention(x, x, x, true, {4}, 0.0, "auto");
  EXPECT_EQ(calls, 1);
  xtrain::testing::expect_close(y, ms_attention::ms_attention_reference(x, x, x, {4}, true), 0, 0, "user kernel");

  auto msg = usage_error([&] { select_attention_kernel("my_smal_ms", call_for(64, {8})); });
  EXPECT_NE(msg.find("did you mean 'my_small_ms'"), std::string::npos) << msg;
  msg = usage_error([&] { select_attention_kernel("my_small_ms", call_for(100, {8})); });
  EXPECT_NE(msg.find("does not support multiscale causal B=2 NH=4 T=100"), std::string::npos) << msg;
  EXPECT_TRUE(unregister_attention_kernel("my_small_ms"));
  EXPECT_FALSE(unregister_attention_kernel("my_small_ms"));

  // fp16 on the CPU: no kernel (not even ATen's ops) runs it.
  msg = usage_error([&] { select_attention_kernel("auto", call_for(64, {8}, at::kHalf)); });
  EXPECT_NE(msg.find("no registered kernel supports multiscale causal"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Half"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ms_fused_cpu (does not support it)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("xtrain.model.attention.kernel"), std::string::npos) << msg;
}

TEST(AttentionRegistry, BadCallsNameTheArgument) {
  const auto x = at::randn({1, 4, 10, 8});
  auto msg = usage_error([&] { run_attention(x, x, x, true, {1, 2, 4, 8, 16}, 0.0); });  // a window without a head
  EXPECT_NE(msg.find("heads (4)"), std::string::npos) << msg;
  msg = usage_error([&] { run_attention(x, x, x, true, {-2}, 0.0); });
  EXPECT_NE(msg.find("windows[0] = -2"), std::string::npos) << msg;
  msg = usage_error([&] { run_attention(x.flatten(0, 1), x, x, true, {}, 0.0); });
  EXPECT_NE(msg.find("q must be [B, NH, T, HS], got [4, 10, 8]"), std::string::npos) << msg;
  msg = usage_error([&] { run_attention(x, x.to(at::kDouble), x, true, {}, 0.0); });
  EXPECT_NE(msg.find("one dtype, got Float, Double"), std::string::npos) << msg;
  msg = usage_error([&] { run_attention(x.to(at::kLong), x.to(at::kLong), x.to(at::kLong), true, {}, 0.0); });
  EXPECT_NE(msg.find("floating point, got Long"), std::string::npos) << msg;
}

}  // namespace
}  // namespace xtrain::kernels::attention::attention_test
