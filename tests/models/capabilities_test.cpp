// The capability hooks of a model's registry entry (models/registry.h): a model registered without
// them is refused, at start-up, for every setting that needs one (tensor_parallel.size,
// pipeline.stages, activation_checkpointing.enabled; `xtrain export`'s sample shape; generate),
// with a message naming the model type, the key and the missing hook; XTRAIN_SMOKE leaves its shape
// alone. The built-ins' sample shapes are the images' 1×28×28 and the GPT's context (closed forms).
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/models/registry.h"
#include "xtrain/run/run_checks.h"
#include "xtrain/run/smoke.h"
#include "xtrain/run/train.h"

namespace xtrain::models::capabilities_test {
namespace {

class BareImpl : public torch::nn::Module {
 public:
  explicit BareImpl(int64_t out) { weight_ = register_parameter("weight", at::zeros({out})); }
  at::Tensor forward(const at::Tensor& x) { return x.to(at::kFloat).sum(-1, true) * weight_; }

 private:
  at::Tensor weight_;
};

// "test_bare" (classify) and "test_bare_lm" (lm): a build function and nothing else.
void register_bare_models() {
  for (const std::string task : {"classify", "lm"}) {
    ModelEntry e;
    e.description = "a model without capability hooks (test)";
    e.task = task;
    e.build = [task](const ModelOptions& o) {
      auto m = std::make_shared<BareImpl>(task == "lm" ? o.vocab : 3);
      return Model{m, [m](const at::Tensor& x) { return m->forward(x); }, "", {}};
    };
    register_model(task == "lm" ? "test_bare_lm" : "test_bare", e);
  }
}

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

void expect_names(const std::string& msg, const std::vector<std::string>& parts) {
  EXPECT_FALSE(msg.empty()) << "no UsageError";
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "\"" << p << "\" missing from: " << msg;
}

config::Config load(const std::string& type, const std::vector<std::string>& sets, int64_t world = 1) {
  config::LoadOptions o;
  o.overrides = sets;
  o.overrides.push_back("xtrain.model.type=" + type);
  o.world_size = world;
  o.quiet = true;
  return config::load_text("{}", o).config;
}

TEST(ModelCapabilities, ParallelismAndCheckpointingNeedTheEntrysHooks) {
  register_bare_models();
  expect_names(usage_error([] { check_tensor_parallel_model("test_bare_lm"); }),
               {"tensor_parallel.size > 1", "\"test_bare_lm\"", "ModelEntry::tensor_parallel"});
  expect_names(usage_error([] { check_pipeline_model("test_bare_lm"); }),
               {"pipeline.stages > 1", "\"test_bare_lm\"", "ModelEntry::pipeline_stage"});
  expect_names(usage_error([] { check_activation_checkpointing_model("test_bare"); }),
               {"activation_checkpointing.enabled", "\"test_bare\"", "ModelEntry::checkpoint_activations"});
  // The start-up checks (`xtrain config`, `xtrain train`) ask the same entry.
  expect_names(usage_error([] { check_run_config(load("test_bare_lm", {"tensor_parallel.size=2"}, 2)); }),
               {"tensor_parallel.size > 1", "\"test_bare_lm\"", "ModelEntry::tensor_parallel"});
  // gpt has every hook.
  EXPECT_EQ(usage_error([] { check_tensor_parallel_model("gpt"); }), "");
  EXPECT_EQ(usage_error([] { check_pipeline_model("gpt"); }), "");
  EXPECT_EQ(usage_error([] { check_activation_checkpointing_model("gpt"); }), "");
  EXPECT_EQ(usage_error([] { check_run_config(load("gpt", {"tensor_parallel.size=2"}, 2)); }), "");
}

TEST(ModelCapabilities, ExportNeedsASampleShape) {
  register_bare_models();
  ModelOptions o;
  o.type = "test_bare";
  expect_names(usage_error([&] { input_sample_shape(o); }),
               {"xtrain export", "\"test_bare\"", "ModelEntry::sample_shape"});
  o.type = "resnet18";
  EXPECT_EQ(input_sample_shape(o), (std::vector<int64_t>{1, 28, 28}));
  o.type = "mlp";
  o.in_features = 784;  // a flattened 28×28 image: exported as the image
  EXPECT_EQ(input_sample_shape(o), (std::vector<int64_t>{1, 28, 28}));
  o.in_features = 10;
  EXPECT_EQ(input_sample_shape(o), (std::vector<int64_t>{10}));
  o.type = "gpt";
  o.seq_len = 48;
  EXPECT_EQ(input_sample_shape(o), (std::vector<int64_t>{48}));
}

TEST(ModelCapabilities, GenerateNeedsTheHook) {
  register_bare_models();
  ModelOptions o;
  o.type = "test_bare_lm";
  o.vocab = 5;
  const Model m = build_model(o);
  expect_names(usage_error([&] { generate_text(m, "ab", 4, 1.0, 0, 1); }),
               {"generate", "\"test_bare_lm\"", "ModelEntry::generate"});
}

TEST(ModelCapabilities, SmokeShrinksOnlyThroughTheTinyHook) {
  register_bare_models();
  const auto bare = smoke::train_overrides(load("test_bare_lm", {}), {}, false);
  for (const auto& o : bare) EXPECT_EQ(o.rfind("xtrain.model.", 0), std::string::npos) << o;
  // gpt, default config (4 heads, context 256): 1 layer, 4 heads of 16, context 64.
  const auto gpt = smoke::train_overrides(load("gpt", {}), {}, false);
  for (const char* o : {"xtrain.model.layers=1", "xtrain.model.heads=4", "xtrain.model.d_model=64",
                        "xtrain.model.seq_len=64"}) {
    EXPECT_NE(std::find(gpt.begin(), gpt.end(), o), gpt.end()) << o;
  }
}

}  // namespace
}  // namespace xtrain::models::capabilities_test
