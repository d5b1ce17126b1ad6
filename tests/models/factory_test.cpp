// build_model, count_parameters and gpt_flops_per_token against closed forms written here
// independently (GPT-2 layout: per block 12C² + 13C; embeddings V·C + T·C; ln_f 2C).
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/models/factory.h"

namespace xtrain::models::factory_test {
namespace {

TEST(Factory, DefaultGptParameterCountIsTheClosedForm) {
  ModelOptions o;  // L4, d256, h4, T256, V256, tied
  const auto model = build_model(o);
  EXPECT_EQ(model.task, "lm");
  const int64_t L = 4, C = 256, T = 256, V = 256;
  const int64_t per_block = (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C) + 4 * C;
  EXPECT_EQ(count_parameters(*model.module), V * C + T * C + L * per_block + 2 * C);
  EXPECT_EQ(count_parameters(*model.module), 3290624);
  o.tie_embeddings = false;
  EXPECT_EQ(count_parameters(*build_model(o).module), 3290624 + V * C);
}

TEST(Factory, GptFlopsPerTokenIsPalms6NPlus12LTC) {
  ModelOptions o;
  // N = all parameters but the position embedding (wte is the tied LM head): 3290624 - T·C.
  const double N = 3290624.0 - 256 * 256;
  EXPECT_DOUBLE_EQ(gpt_flops_per_token(o), 6 * N + 12.0 * 4 * 256 * 256);
  o.tie_embeddings = false;  // the untied head does the same matmul: same FLOPs
  EXPECT_DOUBLE_EQ(gpt_flops_per_token(o), 6 * N + 12.0 * 4 * 256 * 256);
}

TEST(Factory, GptFlopsPerTokenFollowsTheMlpRatio) {
  // N from the built model itself: every parameter but the position embedding (tied head).
  ModelOptions o;
  o.layers = 2;
  o.d_model = 64;
  o.heads = 2;
  o.seq_len = 32;
  for (const int64_t ratio : {1, 2, 4}) {
    o.args = {{"mlp_ratio", ratio}};
    const double N = static_cast<double>(count_parameters(*build_model(o).module)) - 32.0 * 64;
    EXPECT_DOUBLE_EQ(gpt_flops_per_token(o), 6 * N + 12.0 * 2 * 32 * 64) << "mlp_ratio " << ratio;
  }
}

TEST(Factory, ForwardCallableRunsEachModel) {
  ModelOptions o;
  o.layers = 1;
  o.d_model = 16;
  o.heads = 2;
  o.seq_len = 8;
  o.vocab = 32;
  EXPECT_EQ(build_model(o).forward(at::zeros({2, 8}, at::kLong)).sizes(), (std::vector<int64_t>{2, 8, 32}));
  o.type = "mlp";
  o.num_classes = 10;
  o.in_features = 784;
  o.hidden = {8};
  auto mlp = build_model(o);
  EXPECT_EQ(mlp.task, "classify");
  EXPECT_EQ(mlp.forward(at::zeros({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
  o.type = "resnet18";
  auto resnet = build_model(o);
  resnet.module->eval();
  EXPECT_EQ(resnet.forward(at::zeros({1, 1, 28, 28})).sizes(), (std::vector<int64_t>{1, 10}));
}

std::string usage_error(const ModelOptions& o) {
  try {
    build_model(o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

TEST(Factory, ImageModelsNeedSizesFromTheDataset) {
  ModelOptions o;
  o.type = "resnet18";
  EXPECT_NE(usage_error(o).find("xtrain.model.num_classes"), std::string::npos);
  o.type = "mlp";
  o.num_classes = 10;
  EXPECT_NE(usage_error(o).find("xtrain.model.in_features"), std::string::npos);
  o.type = "transformer";
  EXPECT_NE(usage_error(o).find("xtrain.model.type"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::models::factory_test
