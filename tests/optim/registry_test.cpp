// The optimizer registry: the built-ins and DeepSpeed's spellings, the ZeRO traits, and the proof
// that adding an optimizer is one entry: plain gradient descent, registered here, trains through
// the Engine from a ds_config and matches its closed form.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/optim/registry.h"

namespace xtrain::registry_test {
namespace {

std::string load_error(const std::string& text) {
  try {
    config::load_text(text, config::LoadOptions{});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(OptimizerRegistry, BuiltinsSpellingsAndTraits) {
  EXPECT_EQ(optim::optimizer_names(), (std::vector<std::string>{"Adam", "AdamW", "Lamb", "SGD", "LBFGS"}));
  EXPECT_EQ(config::load_text(R"({"optimizer": {"type": "adamw"}})", {}).config.optimizer.type, "AdamW");
  EXPECT_EQ(config::load_text(R"({"optimizer": {"type": "LAMB"}})", {}).config.optimizer.type, "Lamb");
  EXPECT_NE(load_error(R"({"optimizer": {"type": "AdamX"}})")
                .find(R"(optimizer.type must be one of "Adam", "AdamW", "Lamb", "SGD", "LBFGS", got "AdamX" (did you mean)"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"optimizer": {"type": "Lion"}})").find("not supported yet: optimizer.type=\"Lion\""),
            std::string::npos);
  EXPECT_EQ(optim::find_optimizer("Lamb").zero, optim::ZeroSupport::unsupported);
  EXPECT_FALSE(optim::find_optimizer("Lamb").nvme_offload);
  EXPECT_EQ(optim::find_optimizer("SGD").zero, optim::ZeroSupport::untested);
  EXPECT_EQ(optim::find_optimizer("AdamW").state_names, (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(optim::zero_support_summary(), "Adam, AdamW and, with zero_allow_untested_optimizer, SGD");
  try {
    optim::find_optimizer("Sgd");
    ADD_FAILURE() << "names are canonical after the config reader";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.type: unknown optimizer \"Sgd\"; did you mean \"SGD\"?"),
              std::string::npos)
        << e.what();
  }
}

// ---- a test-only optimizer: p <- p - lr * (g + weight_decay * p), one file's worth -------------

struct GdParams {
  double lr = 0.1;
  double weight_decay = 0.0;
  template <class V>
  void visit(V& v) {
    v("lr", lr, "step size");
    v("weight_decay", weight_decay, "L2 penalty added to the gradient");
  }
};

class Gd final : public optim::Optimizer {
 public:
  explicit Gd(GdParams p) : p_(p) {}
  std::string name() const override { return "GD"; }
  void init_state(int64_t) override {}
  void step(const optim::StepInputs& in) override {
    const at::Tensor g = in.grads.to(at::kFloat) * in.grad_scale;
    const std::vector<optim::Segment> whole = {{0, in.params.numel(), 0, 0}};
    for (const auto& s : in.segments ? *in.segments : whole) {
      const auto h = in.groups.empty() ? optim::GroupHyper{p_.lr, p_.weight_decay} : in.groups[s.group];
      at::Tensor p = in.params.narrow(0, s.offset, s.numel);
      p.sub_((g.narrow(0, s.offset, s.numel) + p * h.weight_decay) * h.lr);
    }
    if (in.params_lowp.defined()) in.params_lowp.copy_(in.params);
    ++step_count_;
  }
  std::vector<std::pair<std::string, at::Tensor>> state() override { return {}; }

 private:
  GdParams p_;
};

optim::OptimizerEntry gd_entry() {
  optim::OptimizerEntry e;
  e.config = config::custom_optimizer_type<GdParams>("GD", "plain gradient descent (test only)");
  e.make = [](const optim::OptimizerOptions& o) { return std::make_unique<Gd>(config::custom_params<GdParams>(o)); };
  return e;
}

struct Registered {  // keeps the test optimizer out of the other tests of this process
  Registered() { optim::register_optimizer(gd_entry()); }
  ~Registered() { optim::unregister_optimizer("GD"); }
};

TEST(OptimizerRegistry, AnAddedOptimizerTrainsThroughTheEngineFromTheConfig) {
  Registered gd;
  const auto cfg = config::load_text(R"({"train_micro_batch_size_per_gpu": 1,
      "optimizer": {"type": "gd", "params": {"lr": 0.25, "weight_decay": 0.5}}})", {}).config;
  EXPECT_EQ(cfg.optimizer.type, "GD");
  EXPECT_DOUBLE_EQ(cfg.optimizer.lr(), 0.25);
  // loss = ½‖w - t‖²: gradient w - t, so w_k = t + (1 - lr(1 + wd))^k (w_0 - t) + (decay pulls to 0:
  // the fixed point is t / (1 + wd)). Closed form per element, in double.
  const at::Tensor t = at::arange(6, at::kDouble).reshape({2, 3}) * 0.5 - 1.0;
  const at::Tensor w0 = at::ones({2, 3}, at::kDouble);
  zero::NamedParams params = {{"w", w0.to(at::kFloat).requires_grad_(true)}};
  const at::Tensor target = t.to(at::kFloat);
  Engine engine(params, [&](const data::Batch&) { return 0.5 * (params[0].second - target).pow(2).sum(); }, cfg);
  const int steps = 5;
  for (int k = 0; k < steps; ++k) {
    engine.backward(engine.forward(data::Batch{at::zeros({1}), at::zeros({1})}));
    ASSERT_TRUE(engine.step());
  }
  const double lr = 0.25, wd = 0.5, a = 1 - lr * (1 + wd);
  const at::Tensor fixed = t / (1 + wd);
  const at::Tensor expected = fixed + std::pow(a, steps) * (w0 - fixed);
  const double err = (engine.full_parameters()[0].second.to(at::kDouble) - expected).abs().max().item<double>();
  EXPECT_LT(err, 1e-6) << "fp32 against the double closed form";
  // Its keys are documented like the built-ins' while it is registered.
  EXPECT_NE(config::markdown_reference().find("`optimizer.params (GD).weight_decay`"), std::string::npos);
  EXPECT_NE(load_error(R"({"optimizer": {"type": "GD", "params": {"lr": "fast"}}})").find("optimizer.params.lr must be a number"),
            std::string::npos);
}

TEST(OptimizerRegistry, AnUntestedOptimizerNeedsTheZeroSwitch) {
  Registered gd;
  const std::string text = R"({"optimizer": {"type": "GD"}, "zero_optimization": {"stage": 1}})";
  const auto cfg = config::load_text(text, {}).config;
  zero::NamedParams params = {{"w", at::ones({4, 4}).requires_grad_(true)}};
  try {
    Engine engine(params, [&](const data::Batch&) { return params[0].second.sum(); }, cfg);
    ADD_FAILURE() << "an untested optimizer under ZeRO must need zero_allow_untested_optimizer";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("zero: optimizer GD is not tested with ZeRO (stage 1)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace xtrain::registry_test
