// models::Vit against tests/reference/gen_vit.py (a ViT written with torch's conv2d and
// multi_head_attention_forward, weights loaded by name): logits, loss and every gradient, with a
// class token on a non-square 2-channel image and with mean pooling. Also: the parameter count's
// closed form, 2-D multi-scale attention whose windows cover the grid equals dense (the design
// note: R(0) is then the whole grid, every key a patch of size 1, bias log 1 = 0), the
// xtrain.data.image_size resize against F.interpolate, config errors, and a short
// `xtrain train` on Fashion-MNIST that beats chance.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "models/model_fixture.h"
#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/image_dataset.h"
#include "xtrain/models/registry.h"
#include "xtrain/models/vit.h"
#include "xtrain/nn/losses.h"

namespace xtrain::models::vit_test {
namespace {

using xtrain::testing::expect_close;

ModelOptions tiny(int64_t d, int64_t heads, int64_t layers, int64_t classes, nlohmann::json args) {
  ModelOptions o;
  o.type = "vit";
  o.d_model = d;
  o.heads = heads;
  o.layers = layers;
  o.num_classes = classes;
  o.args = std::move(args);
  return o;
}

// Loads the case's parameters by name and compares logits, loss and every gradient.
void check_against_pytorch(const std::string& prefix, const ModelOptions& o) {
  const auto fx = xtrain::testing::load_tensors("vit.pt");
  Vit model(o);
  xtrain::testing::load_parameters(*model, xtrain::testing::with_prefix(fx, prefix + "param."));
  const auto logits = model->forward(fx.at(prefix + "input"));
  // fp32 on both sides, different op order (GEMM vs conv, fused vs composite attention) over two
  // blocks of LayerNorm-scaled activations: 1e-4 relative.
  expect_close(logits, fx.at(prefix + "logits"), 1e-4, 1e-5, prefix + "logits");
  const auto loss = nn::cross_entropy(logits, fx.at(prefix + "target"));
  expect_close(loss, fx.at(prefix + "loss"), 1e-4, 0, prefix + "loss");
  loss.backward();
  auto params = model->named_parameters();
  const auto grads = xtrain::testing::with_prefix(fx, prefix + "grad.");
  EXPECT_EQ(grads.size(), params.size());
  for (const auto& [key, expected] : grads) {
    ASSERT_TRUE(params.contains(key)) << key;
    // Backward adds another pass of the same sums: 5x looser.
    expect_close(params[key].grad(), expected, 5e-4, 1e-5, prefix + "grad of " + key);
  }
}

TEST(Vit, ClassTokenOnANonSquareImageMatchesPyTorch) {
  check_against_pytorch("cls.", tiny(16, 2, 2, 5, {{"patch", 4}, {"mlp_ratio", 2}, {"channels", 2},
                                                   {"image_size", {8, 12}}}));
}

TEST(Vit, MeanPoolMatchesPyTorch) {
  auto o = tiny(12, 3, 1, 4, {{"patch", 4}, {"pool", "mean"}});
  o.in_features = 64;  // the image size from the dataset's features: 1 x 8 x 8
  check_against_pytorch("mean.", o);
}

// patch: C(ch·P²+1); class token C; positions (n+1)C; per block 2·2C (LNs) + 3C²+3C + C²+C
// + rC²+rC + rC²+C; ln_f 2C; head CK+K.
TEST(Vit, ShapesAndParameterCountAreTheClosedForm) {
  for (const bool cls : {true, false}) {
    const int64_t C = 32, ch = 1, P = 7, n = 16, r = 3, L = 3, K = 10;
    auto o = tiny(C, 4, L, K, {{"patch", P}, {"mlp_ratio", r}, {"pool", cls ? "cls" : "mean"}});
    o.in_features = 28 * 28;
    auto model = find_model("vit").build(o);
    int64_t count = 0;
    for (const auto& p : model.module->parameters()) count += p.numel();
    const int64_t tokens = n + (cls ? 1 : 0);
    const int64_t expected = C * (ch * P * P + 1) + (cls ? C : 0) + tokens * C +
                             L * (4 * C + 3 * C * C + 3 * C + C * C + C + r * C * C + r * C + r * C * C + C) + 2 * C +
                             C * K + K;
    EXPECT_EQ(count, expected) << (cls ? "cls" : "mean");
    EXPECT_EQ(model.forward(at::randn({5, 1, 28, 28})).sizes(), (std::vector<int64_t>{5, K}));
    EXPECT_EQ(input_sample_shape(o), (std::vector<int64_t>{1, 28, 28}));
  }
}

// Windows of side >= 2·grid make R(0) the whole grid for every query: the multi-scale kernel
// then computes dense attention (docs/design/multiscale-attention-2d.md).
TEST(Vit, MultiscaleWithWindowsCoveringTheGridEqualsDense) {
  for (const std::string pool : {"cls", "mean"}) {
    auto o = tiny(24, 3, 2, 6, {{"patch", 4}, {"pool", pool}, {"image_size", {12, 20}}});  // grid 3x5
    at::manual_seed(7);
    Vit dense(o);
    // Large weights: at init (N(0, 0.02)) every score is ~0 and any partition with the log(size)
    // bias averages V uniformly, so small windows would pass too.
    std::map<std::string, at::Tensor> w;
    for (const auto& p : dense->named_parameters()) w[p.key()] = at::randn(p.value().sizes()) * 0.3;
    xtrain::testing::load_parameters(*dense, w);
    const auto x = at::randn({2, 1, 12, 20});
    at::Tensor reference;
    {
      at::NoGradGuard no_grad;
      reference = dense->forward(x);
    }
    o.attention.type = "multiscale";
    for (const auto& windows : {std::vector<int64_t>{10, 12}, std::vector<int64_t>{1, 2}}) {
      o.attention.windows = windows;
      Vit ms(o);
      xtrain::testing::load_parameters(*ms, w);
      at::NoGradGuard no_grad;
      const auto y = ms->forward(x);
      if (windows[0] == 10) {
        // Dense and multi-scale kernels sum the same terms in different orders (fp32).
        expect_close(y, reference, 1e-4, 1e-5, "multiscale vs dense, pool " + pool);
      } else {  // the control: windows smaller than the grid change the output
        EXPECT_GT((y - reference).abs().max().item<double>(), 1e-3) << "windows 1, 2 equal dense, pool " << pool;
      }
    }
  }
}

TEST(Vit, ImageSizeResizesBilinearlyAsTorch) {
  const auto fx = xtrain::testing::load_tensors("vit.pt");
  const data::ImageNormalisation norm{fx.at("resize.mean").item<double>(), fx.at("resize.std").item<double>()};
  const auto pixels = fx.at("resize.pixels");
  const auto labels = at::zeros({pixels.size(0)}, at::kByte);
  for (const auto& [size, key] : {std::pair<int64_t, std::string>{11, "resize.up"}, {3, "resize.down"}}) {
    data::ImageDataset ds(pixels, labels, norm, 10, "fixture", size);
    EXPECT_EQ(ds.info().sample_shape, (std::vector<int64_t>{1, size, size}));
    // The same ATen kernel on float32 inputs built the same way: observed identical; 1e-6 slack.
    expect_close(ds.collate({0, 1, 2}).input, fx.at(key), 1e-6, 1e-6, key);
  }
  data::ImageDataset as_stored(pixels, labels, norm, 10, "fixture");
  EXPECT_EQ(as_stored.collate({0}).input.sizes(), (std::vector<int64_t>{1, 1, 5, 7}));
}

TEST(Vit, ConfigErrorsNameTheKey) {
  auto expect_error = [](nlohmann::json args, int64_t in_features, const std::string& needle) {
    auto o = tiny(16, 2, 1, 10, std::move(args));
    o.in_features = in_features;
    try {
      Vit model(o);
      ADD_FAILURE() << "no error for " << o.args.dump();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{"patch", 5}}, 784, "xtrain.model.args.patch");
  expect_error({{"pool", "max"}}, 784, "xtrain.model.args.pool");
  expect_error({{"patches", 4}}, 784, "xtrain.model.args.patches is not a vit setting");
  expect_error(nlohmann::json::object(), 700, "xtrain.model.args.image_size");
  expect_error({{"image_size", "big"}}, 784, "xtrain.model.args.image_size");
}

// `xtrain train` with a small ViT for a few steps on Fashion-MNIST: validation accuracy at
// least 3x chance (10%; ~39% observed). ~3 s each on 2 cores.
TEST(Vit, ShortFashionMnistRunBeatsChance) {
  for (const std::string attention : {"dense", "multiscale"}) {
    const auto dir = xtrain::testing::temp_dir("vit-train");
    std::ofstream(dir + "/train.json") << R"({
      "train_batch_size": 64, "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.0}},
      "xtrain": {"model": {"type": "vit", "d_model": 32, "heads": 2, "layers": 1, "args": {"patch": 7},
                           "attention": {"type": ")" + attention + R"(", "windows": [2, 4]}},
                 "data": {"type": "fashion_mnist"},
                 "steps": 60, "eval_interval": 60, "eval_batches": 8, "save_interval": 0}
    })";
    std::string out;
    const int rc = xtrain::testing::run_command(
        xtrain::testing::xtrain_binary() + " train --config " + dir + "/train.json --output " + dir + "/run", &out);
    if (out.find("fashion_mnist' not found") != std::string::npos) GTEST_SKIP() << "no Fashion-MNIST here";
    ASSERT_EQ(rc, 0) << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex("val accuracy ([0-9.]+)%"))) << out;
    EXPECT_GT(std::stod(m[1]), 30.0) << attention << "\n" << out;
  }
}

}  // namespace
}  // namespace xtrain::models::vit_test
