// The engine's step semantics end to end against PyTorch (gen_engine.py): gradient accumulation,
// clipping, decay groups and DeepSpeed's WarmupLR alignment; plus checkpoint round trips.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"

namespace xtrain::engine_test {
namespace {

const char* kConfig = R"({
  "train_micro_batch_size_per_gpu": 5, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
  "optimizer": {"type": "AdamW", "params": {"lr": 0.02, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 0.02,
                                               "warmup_num_steps": 4, "warmup_type": "linear"}}})";

struct TinyMlp {
  zero::NamedParams params;
  at::Tensor loss(const data::Batch& b) const {
    auto h = at::gelu(at::linear(b.input, params[0].second, params[1].second));
    return at::cross_entropy_loss(at::linear(h, params[2].second, params[3].second), b.target);
  }
};

TinyMlp make_mlp(std::map<std::string, at::Tensor>& fx) {
  TinyMlp m;
  for (const char* name : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    m.params.emplace_back(name, fx.at(std::string("init/") + name).clone().requires_grad_(true));
  }
  return m;
}

std::unique_ptr<Engine> make_engine(TinyMlp& m) {
  auto cfg = config::load_text(kConfig, {}).config;
  return std::make_unique<Engine>(m.params, [&m](const data::Batch& b) { return m.loss(b); }, cfg);
}

void run_steps(Engine& e, std::map<std::string, at::Tensor>& fx, int64_t from, int64_t to,
               std::vector<StepStats>* stats = nullptr) {
  for (int64_t k = from; k < to; ++k) {
    for (int64_t m = 0; m < 2; ++m) {
      const int64_t i = k * 2 + m;
      data::Batch b{fx.at("inputs")[i], fx.at("targets")[i]};
      e.backward(e.forward(b));
      EXPECT_EQ(e.step(), m == 1);
    }
    if (stats) stats->push_back(e.last_step());
  }
}

TEST(Engine, MatchesPyTorchStepSemantics) {
  auto fx = testing::load_tensors("engine.pt");
  TinyMlp m = make_mlp(fx);
  auto e = make_engine(m);
  std::vector<StepStats> stats;
  run_steps(*e, fx, 0, 8, &stats);
  ASSERT_EQ(stats.size(), 8u);
  const auto losses = fx.at("losses");
  const auto norms = fx.at("grad_norms");
  for (int64_t k = 0; k < 8; ++k) {
    // fp32 forward/backward in a different op order: agreement to ~1e-6 relative.
    EXPECT_NEAR(stats[k].loss, losses[k].item<double>(), 1e-5) << "step " << k + 1;
    EXPECT_NEAR(stats[k].grad_norm, norms[k].item<double>(), 1e-5 * norms[k].item<double>()) << "step " << k + 1;
  }
  for (const auto& [name, p] : m.params) {
    // 8 Adam steps amplify fp32 rounding (division by sqrt(v)); 1e-5 relative is still tight.
    testing::expect_close(p, fx.at("final/" + name), 1e-5, 1e-6, name);
  }
  EXPECT_EQ(e->global_steps(), 8);
  EXPECT_EQ(e->global_samples(), 80);
}

TEST(Engine, CheckpointRoundTripIsExact) {
  auto fx = testing::load_tensors("engine.pt");
  TinyMlp a = make_mlp(fx);
  auto ea = make_engine(a);
  run_steps(*ea, fx, 0, 8);

  const std::string root = testing::temp_dir("engine-ckpt");
  TinyMlp b = make_mlp(fx);
  auto eb = make_engine(b);
  run_steps(*eb, fx, 0, 3);
  {
    checkpoint::CheckpointWriter w(root, "step3");
    eb->save_checkpoint(w);
    w.finish_rank();
    w.commit();
  }
  TinyMlp c = make_mlp(fx);
  auto ec = make_engine(c);
  ec->load_checkpoint(checkpoint::CheckpointReader(root));
  EXPECT_EQ(ec->global_steps(), 3);
  run_steps(*ec, fx, 3, 8);
  for (size_t i = 0; i < a.params.size(); ++i) {
    testing::expect_equal(c.params[i].second, a.params[i].second, "resumed " + a.params[i].first);
  }
}

}  // namespace
}  // namespace xtrain::engine_test
