// Weights in and out: a tiny GPT-2 in the Hugging Face layout, written with its logits by
// tests/reference/gen_safetensors.py from GPT-2's own definition (Conv1D [in, out], gelu_new), loads into our GPT
// through xtrain.model.init_from's loader and gives the same logits; our hf-gpt2 names map back onto that file; `xtrain
// export --safetensors` (both layouts), init_from (file, run directory, the config keys through train) round-trip a
// trained run exactly; every bad input is a clear error naming the tensor and the shapes.
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/safetensors.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/hf_gpt2.h"
#include "xtrain/run/init_from.h"
#include "xtrain/run/train.h"

namespace xtrain::safetensors_init_test {
namespace {

const std::string kGpt2 = "safetensors/gpt2_tiny.safetensors";

// The fixture's GPT-2: 2 layers, C 32, 4 heads, V 96; our context 16 (the file has 32 positions).
models::ModelOptions gpt2_options(bool tied = true) {
  const auto cfg = testing::load_tensors("safetensors/gpt2_tiny_io.pt").at("config");
  models::ModelOptions o;
  o.layers = cfg[0].item<int64_t>(), o.d_model = cfg[1].item<int64_t>(), o.heads = cfg[2].item<int64_t>();
  o.vocab = cfg[3].item<int64_t>(), o.seq_len = 16, o.tie_embeddings = tied;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SafetensorsInit, HuggingFaceGpt2GivesTheReferenceLogits) {
  const auto io = testing::load_tensors("safetensors/gpt2_tiny_io.pt");
  models::GPT gpt(gpt2_options());
  const auto report = init_model_from(*gpt, testing::fixture(kGpt2), /*strict=*/true);
  EXPECT_EQ(report.loaded.size(), gpt->named_parameters().size());
  gpt->eval();
  testing::expect_close(gpt->forward(io.at("idx")), io.at("logits"), 1e-4, 1e-4, "logits vs GPT-2 reference");
}

TEST(SafetensorsInit, OurHfNamesAreTheFilesNames) {
  const auto file = checkpoint::read_safetensors(testing::fixture(kGpt2)).tensors;
  const auto back = models::to_hf_gpt2(models::from_hf_gpt2(file));
  std::map<std::string, at::Tensor> expected;
  for (const auto& [name, t] : file) {
    if (name.find(".attn.bias") == std::string::npos) expected[name] = t;  // the mask buffers are dropped
  }
  ASSERT_EQ(back.size(), expected.size());
  for (const auto& [name, t] : back) {
    ASSERT_TRUE(expected.count(name)) << name;
    EXPECT_TRUE(at::equal(t, expected[name])) << name;
  }
}

TEST(SafetensorsInit, MismatchesAreErrorsNamingTensorAndShapes) {
  const std::string file = testing::fixture(kGpt2);
  auto o = gpt2_options();
  o.vocab = 100;
  models::GPT wide(o);
  EXPECT_NE(error_of([&] { init_model_from(*wide, file, true); })
                .find("tensor 'wte.weight' is [96, 32] in the source but the "
                      "model expects [100, 32]"),
            std::string::npos);
  models::GPT untied(gpt2_options(/*tied=*/false));
  const std::string missing = error_of([&] { init_model_from(*untied, file, true); });
  EXPECT_NE(missing.find("has no tensor for 1 of the model's: lm_head.weight [96, 32]"), std::string::npos) << missing;
  EXPECT_NE(missing.find("xtrain.model.init_strict false"), std::string::npos) << missing;
  const auto lax = init_model_from(*untied, file, /*strict=*/false);  // the trunk loads, the head stays fresh
  EXPECT_EQ(lax.fresh, std::vector<std::string>{"lm_head.weight [96, 32]"});
  EXPECT_EQ(lax.loaded.size() + 1, untied->named_parameters().size());

  models::GPT gpt(gpt2_options());
  auto source = read_init_source(file);
  source.emplace_back("head.weight", at::zeros({2, 32}));
  EXPECT_NE(error_of([&] {
              load_init_weights(*gpt, source, true, "src");
            }).find("src has 1 tensors the model does not: head.weight [2, 32]"),
            std::string::npos);
  EXPECT_EQ(load_init_weights(*gpt, source, false, "src").ignored, std::vector<std::string>{"head.weight [2, 32]"});
  source.back() = {"ln_f.bias", at::zeros({32}, at::kLong)};
  source.erase(std::find_if(source.begin(), source.end(), [](const auto& p) { return p.first == "ln_f.bias"; }));
  EXPECT_NE(error_of([&] { load_init_weights(*gpt, source, false, "src"); })
                .find("tensor 'ln_f.bias' is Long in the source but the "
                      "model's is Float"),
            std::string::npos);
}

TEST(SafetensorsInit, BadSourcesAreErrorsNamingTheKey) {
  models::GPT gpt(gpt2_options());
  const std::string dir = testing::temp_dir("init-bad");
  EXPECT_NE(error_of([&] { read_init_source(dir + "/none.safetensors"); }).find("xtrain.model.init_from: "),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_init_source(dir); }).find("is a folder but not a run directory"), std::string::npos);
  EXPECT_NE(error_of([&] {
              read_init_source(testing::fixture("safetensors/dtypes.pt"));
            }).find("is neither a .safetensors file nor a run directory"),
            std::string::npos);
  checkpoint::write_safetensors(dir + "/other.safetensors", {{"foo.weight", at::full({2}, 1.0)}});
  EXPECT_NE(error_of([&] {
              init_model_from(*gpt, dir + "/other.safetensors", false);
            }).find("no tensor of " + dir + "/other.safetensors matches a model tensor by name"),
            std::string::npos);
}

// One tiny trained run (1 layer, C 32, context 16) for the tests below, and its request.
const TrainRequest& trained() {
  static const TrainRequest r = [] {
    const std::string root = testing::temp_dir("init-roundtrip");
    TrainRequest req;
    req.output = root + "/run";
    req.overrides = {"xtrain.data.path=" + testing::write_corpus(root, 200, 13), "xtrain.model.layers=1",
                     "xtrain.model.d_model=32", "xtrain.model.heads=2", "xtrain.model.seq_len=16",
                     "train_micro_batch_size_per_gpu=4", "xtrain.steps=2", "xtrain.eval_interval=0",
                     "xtrain.eval_batches=1", "xtrain.generate.tokens=0"};
    train(req);
    return req;
  }();
  return r;
}

// Every parameter of `model` equals the trained run's, except those named in `differ` (which must differ).
void expect_run_weights(torch::nn::Module& model, const std::string& what, const std::set<std::string>& differ = {}) {
  const auto want = load_trained_run(trained().output).model.module->named_parameters();
  for (const auto& p : model.named_parameters()) {
    const at::Tensor* w = want.find(p.key());
    const bool same = w != nullptr && w->sizes() == p.value().sizes() && at::equal(p.value(), *w);
    EXPECT_EQ(same, differ.count(p.key()) == 0) << what << ": " << p.key();
  }
}

// `xtrain export --safetensors` in both layouts; each file and the run directory itself initialise a fresh model to
// exactly the run's weights.
TEST(SafetensorsInit, ExportThenInitFromRoundTrips) {
  const std::string run = trained().output;
  const auto model_options = load_trained_run(run).config.model;
  for (const std::string layout : {"xtrain", "hf-gpt2"}) {
    const std::string file = testing::temp_dir("init-export") + "/" + layout + ".safetensors";
    std::string out;
    ASSERT_EQ(testing::run_command(testing::xtrain_binary() + " export --run " + run + " --safetensors " + file +
                                       " --layout " + layout + " 2>&1",
                                   &out),
              0)
        << out;
    EXPECT_EQ(checkpoint::read_safetensors(file).metadata.at("xtrain.layout"), layout);
    for (const std::string& source : {file, run}) {
      auto fresh = models::build_model(model_options);
      init_model_from(*fresh.module, source, /*strict=*/true);
      expect_run_weights(*fresh.module, layout + " " + source);
    }
  }
  // The ONNX-only options are refused with --safetensors (exit 2: a usage error), not ignored.
  std::string out;
  EXPECT_EQ(testing::run_command(testing::xtrain_binary() + " export --run " + run + " --safetensors " +
                                     testing::temp_dir("init-export") + "/x.safetensors --int8 2>&1",
                                 &out),
            2)
      << out;
  EXPECT_NE(out.find("excludes --int8"), std::string::npos) << out;
}

// The config keys through `train`: at lr 0 a run started from init_from keeps those weights; an untied model needs
// init_strict false and then keeps a fresh lm_head; a missing file names the key.
TEST(SafetensorsInit, InitFromKeysTrainThroughTheRun) {
  const std::string root = testing::temp_dir("init-keys");
  TrainRequest r = trained();
  r.output = root + "/warm";
  r.overrides.insert(r.overrides.end(),
                     {"xtrain.model.init_from=" + trained().output, "optimizer.params.lr=0", "xtrain.steps=1"});
  train(r);
  expect_run_weights(*load_trained_run(r.output).model.module, "lr 0 from init_from");

  r.output = root + "/untied";
  r.overrides.push_back("xtrain.model.tie_embeddings=false");
  EXPECT_NE(error_of([&] { train(r); }).find("has no tensor for 1 of the model's: lm_head.weight [256, 32]"),
            std::string::npos);
  r.overrides.push_back("xtrain.model.init_strict=false");
  train(r);
  expect_run_weights(*load_trained_run(r.output).model.module, "untied", {"lm_head.weight"});

  const std::string missing = root + "/missing.safetensors";
  r.output = root + "/missing";
  r.overrides.push_back("xtrain.model.init_from=" + missing);
  EXPECT_NE(error_of([&] { train(r); }).find("xtrain.model.init_from: " + missing + " does not exist"),
            std::string::npos);
}

}  // namespace
}  // namespace xtrain::safetensors_init_test
