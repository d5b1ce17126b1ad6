// Mixed precision through the Engine: fp16 overflow injection (the step is skipped and nothing
// changes), bf16 parameters == rounded fp32 master, bf16 training tracks fp32, AMP matches PyTorch's
// CPU autocast (gen_amp.py), fp16 on CPU is refused with a hint.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/models/factory.h"
#include "xtrain/nn/losses.h"

namespace xtrain::mixed_precision_test {
namespace {

config::Config load(const std::string& json) { return config::load_text(json, {}).config; }

std::map<std::string, at::Tensor> snapshot(const Engine& e) {
  const std::string root = testing::temp_dir("mp-snap");
  checkpoint::CheckpointWriter w(root, "t");
  e.save_checkpoint(w);
  w.finish_rank();
  w.commit();
  checkpoint::CheckpointReader r(root);
  std::map<std::string, at::Tensor> out;
  for (const char* f : {"model.pt", "optimizer.pt"}) {
    for (auto& [k, v] : r.read_tensors(f)) out[std::string(f) + ":" + k] = v;
  }
  return out;
}

// A model made only of ops LibTorch implements for fp16 on CPU (mul, add, sum), so the real fp16
// path (fp16 parameters, scaled backward, fp32 master) runs here.
TEST(MixedPrecision, Fp16OverflowSkipsTheStepAndChangesNothing) {
  auto cfg = load(R"({"train_micro_batch_size_per_gpu": 4, "fp16": {"enabled": true, "initial_scale_power": 4,
      "hysteresis": 1}, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "warmup_max_lr": 0.01}}})");
  auto w = at::full({4}, 0.5, at::kFloat).requires_grad_(true);
  auto b = at::zeros({4}, at::kFloat).requires_grad_(true);
  zero::NamedParams params = {{"w", w}, {"b", b}};
  Engine e(params, [&](const data::Batch& batch) {
    auto y = batch.input * params[0].second + params[1].second;
    return (y * y).sum() * 0.25;
  }, cfg);
  EXPECT_EQ(params[0].second.scalar_type(), at::kHalf);
  auto run = [&](double x) {
    data::Batch batch{at::full({4}, x, at::kHalf), at::Tensor()};
    e.backward(e.forward(batch));
    e.step();
    return e.last_step();
  };
  EXPECT_FALSE(run(1.0).skipped);
  const auto before = snapshot(e);
  const double lr_before = e.current_lr();
  // grad = 2·(x·w)·x/4 ≈ 1.2e8 for x = 2e4: beyond fp16's 65504 once scaled — an overflow.
  const auto st = run(2e4);
  EXPECT_TRUE(st.skipped);
  EXPECT_EQ(e.skipped_steps(), 1);
  EXPECT_EQ(e.global_steps(), 2);
  EXPECT_EQ(e.loss_scaler().scale(), 8.0);  // 16 halved (hysteresis 1)
  EXPECT_EQ(e.current_lr(), lr_before);     // the scheduler did not move
  const auto after = snapshot(e);
  for (const auto& [k, v] : before) testing::expect_equal(after.at(k), v, k);
  EXPECT_FALSE(run(1.0).skipped);  // training continues at the new scale
  const auto messages = e.take_scaler_messages();
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages.front().find("16 -> 8"), std::string::npos) << messages.front();
}

models::Model tiny_gpt() {
  models::ModelOptions mo;
  mo.layers = 2;
  mo.d_model = 32;
  mo.heads = 2;
  mo.seq_len = 16;
  mo.vocab = 32;
  return models::build_model(mo);
}

data::Batch pattern_batch(int64_t step) {
  // A learnable sequence: token t+1 = (token t * 3 + 1) mod 32, different start per row.
  auto x = at::empty({8, 17}, at::kLong);
  auto* p = x.data_ptr<int64_t>();
  for (int64_t r = 0; r < 8; ++r) {
    int64_t v = (r * 5 + step * 7) % 32;
    for (int64_t t = 0; t < 17; ++t, v = (v * 3 + 1) % 32) p[r * 17 + t] = v;
  }
  return {x.narrow(1, 0, 16), x.narrow(1, 1, 16)};
}

std::vector<double> train_gpt(const std::string& extra, int64_t steps, std::shared_ptr<torch::nn::Module>* out = nullptr,
                              Engine** engine_out = nullptr) {
  torch::manual_seed(3);
  auto model = tiny_gpt();
  auto cfg = load(R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.003}})" + extra + "}");
  auto loss = nn::make_loss(nn::LossOptions{});
  static std::unique_ptr<Engine> keep;
  keep = std::make_unique<Engine>(model.module, [&](const data::Batch& b) { return loss(model.forward(b.input), b.target); },
                                  cfg);
  std::vector<double> losses;
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t m = 0; m < 2; ++m) {
      keep->backward(keep->forward(pattern_batch(s * 2 + m)));
      keep->step();
    }
    losses.push_back(keep->last_step().loss);
  }
  if (out) *out = model.module;
  if (engine_out) *engine_out = keep.get();
  return losses;
}

TEST(MixedPrecision, Bf16TracksFp32) {
  const auto fp32 = train_gpt("", 40);
  std::shared_ptr<torch::nn::Module> module;
  const auto bf16 = train_gpt(R"(, "bf16": {"enabled": true})", 40, &module);
  for (const auto& p : module->parameters()) EXPECT_EQ(p.scalar_type(), at::kBFloat16);
  // Both learn the pattern: the loss falls well below its start (ln 32 = 3.47).
  EXPECT_LT(fp32.back(), 0.6 * fp32.front());
  EXPECT_LT(bf16.back(), 0.6 * bf16.front());
  // bf16 keeps 8 mantissa bits: per-step losses agree to a few percent (observed < 2%), never
  // drifting apart; 5% leaves room for rounding differences to compound over 40 steps.
  for (size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(bf16[i], fp32[i], 0.05 * fp32[i]) << "step " << i + 1;
}

TEST(MixedPrecision, Bf16ParametersAreTheRoundedMaster) {
  std::shared_ptr<torch::nn::Module> module;
  Engine* engine = nullptr;
  train_gpt(R"(, "bf16": {"enabled": true})", 3, &module, &engine);
  const auto snap = snapshot(*engine);
  for (const auto& item : module->named_parameters(true)) {
    const auto master = snap.at("model.pt:" + item.key());
    testing::expect_equal(item.value(), master.to(at::kBFloat16), item.key());
  }
}

TEST(MixedPrecision, AmpMatchesPyTorchCpuAutocast) {
  auto engine_fx = testing::load_tensors("engine.pt");
  auto amp = testing::load_tensors("amp.pt");
  zero::NamedParams params;
  for (const char* n : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    params.emplace_back(n, engine_fx.at(std::string("init/") + n).clone().requires_grad_(true));
  }
  auto cfg = load(R"({"train_micro_batch_size_per_gpu": 5, "amp": {"enabled": true}})");
  bool saw_bf16 = false;
  Engine e(params, [&](const data::Batch& b) {
    auto h = at::gelu(at::linear(b.input, params[0].second, params[1].second));
    auto logits = at::linear(h, params[2].second, params[3].second);
    saw_bf16 = logits.scalar_type() == at::kBFloat16;
    return at::cross_entropy_loss(logits.to(at::kFloat), b.target);
  }, cfg);
  EXPECT_EQ(params[0].second.scalar_type(), at::kFloat);  // AMP keeps fp32 parameters
  const auto loss = e.forward({engine_fx.at("inputs")[0], engine_fx.at("targets")[0]});
  EXPECT_TRUE(saw_bf16);
  e.backward(loss);
  // Same oneDNN bf16 kernels as PyTorch's autocast; allow bf16 rounding (2^-8) of the activations.
  EXPECT_NEAR(loss.item<double>(), amp.at("loss").item<double>(), 1e-2);
  for (const auto& [name, p] : params) testing::expect_close(p.grad(), amp.at("grad/" + name), 2e-2, 2e-3, name);
}

TEST(MixedPrecision, Fp16OnCpuIsRefusedWithAHint) {
  try {
    precision::check_cpu_supported(precision::make_policy(load(R"({"fp16": {"enabled": true}})").fp16, {}, {}, false, ""));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("\"bf16\": {\"enabled\": true}"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::mixed_precision_test
