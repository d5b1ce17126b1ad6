// The KV-cache decoder on the int8 layers of a converted plan (serve::int8_decoder_weights) against
// the int8 model as `xtrain compress` runs it (compress::run_graph through the same plan, the whole
// context per position): the same int8 kernels, the same dequantised embedding tables.
#include <ATen/ops/randint.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/quant/quantize.h"
#include "xtrain/models/factory.h"
#include "xtrain/models/gpt.h"
#include "xtrain/serve/served_model.h"

namespace xtrain::serve::int8_decoder_test {
namespace {

TEST(Int8Decoder, CachedLogitsEqualTheInt8GraphAtEveryPosition) {
  at::NoGradGuard no_grad;
  models::ModelOptions o;
  o.layers = 2, o.d_model = 32, o.heads = 4, o.seq_len = 24, o.vocab = 64;
  torch::manual_seed(3);
  auto m = models::build_model(o);
  m.module->eval();
  auto q = compress::wrap(m, compress::QuantOptions{});  // static int8, min/max observers
  const auto calib = at::randint(0, 64, {8, 24}, at::kLong);
  compress::calibrate(q, [&](int64_t) { return calib; }, 1);
  compress::convert(q);
  const auto weights = int8_decoder_weights(*q.graph, *q.plan);
  EXPECT_TRUE(weights.wte.defined());
  EXPECT_EQ(weights.linears.count("blocks.1.mlp.fc"), 1u);
  EXPECT_EQ(weights.linears.count("lm_head"), 1u);
  auto decoder = models::make_gpt_decoder(std::dynamic_pointer_cast<models::GPTImpl>(m.module), weights);
  auto state = decoder->start();
  const auto seq = at::randint(0, 64, {24}, at::kLong);
  const std::vector<int64_t> tokens(seq.data_ptr<int64_t>(), seq.data_ptr<int64_t>() + 24);
  at::Tensor got = decoder->prefill(*state, {tokens[0]});
  for (int64_t t = 0; t < 24; ++t) {
    if (t > 0) got = decoder->step({state.get()}, {tokens[t]})[0];
    const auto want = compress::run_graph(*q.graph, seq.narrow(0, 0, t + 1).view({1, -1}), q.plan.get())[0][-1];
    // The float paths around the int8 GEMMs (attention, LayerNorm) differ in the last ulp; an
    // activation on a rounding tie may then quantise one step apart: a few 1e-4 on these logits
    // (0.02-scale weights), far below the int8 error itself (~1e-2 against fp32).
    const double err = (got - want).abs().max().item<double>();
    EXPECT_LT(err, 2e-3) << "position " << t;
  }
}

}  // namespace
}  // namespace xtrain::serve::int8_decoder_test
