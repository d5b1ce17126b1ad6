// The model registry as a plugin uses it: a test registers a softmax-regression model and a
// dataset of fixed points, both reading settings from xtrain.{model,data}.args, and trains them
// through xtrain::train (the run loop `xtrain train` runs). The losses are checked against full-batch
// gradient descent on the same problem in float64, written here independently. Also: unknown
// names fail with the closest registered name, bad entries are refused, args are free JSON.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <cmath>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/data/registry.h"
#include "xtrain/run/train.h"
#include "xtrain/models/registry.h"

namespace xtrain::models::registry_test {
namespace {

constexpr int64_t kFeatures = 2;

// Sample i of the point set: two features and a label, the same in float (dataset) and double
// (reference).
double feature(int64_t i, int64_t f) { return f == 0 ? std::cos(0.7 * i) * (1 + i % 2) : std::sin(1.3 * i) - 0.2; }
int64_t label(int64_t i, int64_t classes) { return i % classes; }

// logits = (x · Wᵀ + b) / temperature, W and b starting at zero.
class SoftmaxImpl : public torch::nn::Module {
 public:
  SoftmaxImpl(int64_t in, int64_t classes, double temperature) : temperature_(temperature) {
    weight_ = register_parameter("weight", at::zeros({classes, in}));
    bias_ = register_parameter("bias", at::zeros({classes}));
  }
  at::Tensor forward(const at::Tensor& x) { return (x.flatten(1).matmul(weight_.t()) + bias_) / temperature_; }

 private:
  double temperature_;
  at::Tensor weight_, bias_;
};

class PointsDataset : public data::Dataset {
 public:
  PointsDataset(int64_t n, int64_t classes) : n_(n), classes_(classes) {}
  int64_t size() const override { return n_; }
  data::Batch collate(const std::vector<int64_t>& indices) const override {
    const int64_t B = static_cast<int64_t>(indices.size());
    data::Batch b{at::empty({B, kFeatures}, at::kFloat), at::empty({B}, at::kLong)};
    for (int64_t r = 0; r < B; ++r) {
      for (int64_t f = 0; f < kFeatures; ++f) b.input[r][f] = feature(indices[r], f);
      b.target[r] = label(indices[r], classes_);
    }
    return b;
  }
  data::DatasetInfo info() const override { return {"image", 0, 0, classes_, {kFeatures}}; }

 private:
  int64_t n_, classes_;
};

double temperature_of(const ModelOptions& o) { return o.args.value("temperature", 1.0); }

void register_test_plugin() {
  ModelEntry m;
  m.description = "softmax regression (test)";
  m.task = "classify";
  m.build = [](const ModelOptions& o) {
    auto module = std::make_shared<SoftmaxImpl>(o.in_features, o.num_classes, temperature_of(o));
    return Model{module, [module](const at::Tensor& x) { return module->forward(x); }, "", {}};
  };
  m.keys = {{"args.temperature", "divides the logits"}};
  m.validate = [](const ModelOptions& o) {
    const auto& t = o.args.value("temperature", nlohmann::json(1.0));
    XTRAIN_USAGE_CHECK(t.is_number() && t.get<double>() > 0, "test_softmax: xtrain.model.args.temperature must be a "
                       "number > 0, got ", t.dump());
  };
  register_model("test_softmax", m);
  data::DatasetEntry d;
  d.description = "fixed points (test)";
  d.task = "classify";
  d.open = [](const data::DataOptions& o, int64_t, const std::string&) {
    const int64_t n = o.args.value("n", int64_t{6}), classes = o.args.value("classes", int64_t{3});
    return data::Splits{std::make_shared<PointsDataset>(n, classes), std::make_shared<PointsDataset>(n, classes)};
  };
  data::register_dataset("test_points", d);
}

// Mean cross-entropy of the softmax regression over samples 0..n-1, and its gradient.
struct Reference {
  int64_t n, classes;
  double lr, temperature;
  std::vector<double> w = std::vector<double>(classes * kFeatures, 0.0), b = std::vector<double>(classes, 0.0);

  double loss_and_step(bool step) {
    std::vector<double> gw(w.size(), 0.0), gb(b.size(), 0.0);
    double loss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> z(classes);
      double zmax = -1e300, sum = 0.0;
      for (int64_t k = 0; k < classes; ++k) {
        z[k] = b[k];
        for (int64_t f = 0; f < kFeatures; ++f) z[k] += w[k * kFeatures + f] * feature(i, f);
        z[k] /= temperature;
        zmax = std::max(zmax, z[k]);
      }
      for (int64_t k = 0; k < classes; ++k) sum += std::exp(z[k] - zmax);
      loss += (zmax + std::log(sum) - z[label(i, classes)]) / n;
      for (int64_t k = 0; k < classes; ++k) {
        const double g = (std::exp(z[k] - zmax) / sum - (k == label(i, classes))) / (n * temperature);
        gb[k] += g;
        for (int64_t f = 0; f < kFeatures; ++f) gw[k * kFeatures + f] += g * feature(i, f);
      }
    }
    if (step) {
      for (size_t j = 0; j < w.size(); ++j) w[j] -= lr * gw[j];
      for (size_t j = 0; j < b.size(); ++j) b[j] -= lr * gb[j];
    }
    return loss;
  }
};

std::string write_config(const std::string& dir) {
  const std::string path = dir + "/ds_config.json";
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 6, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "SGD", "params": {"lr": 0.5, "momentum": 0, "weight_decay": 0}},
    "gradient_clipping": 0,
    "xtrain": {"model": {"type": "test_softmax"}, "data": {"type": "test_points", "prefetch": 0},
               "steps": 5, "eval_interval": 0, "eval_batches": 0, "save_interval": 0, "seed": 7}})";
  return path;
}

TEST(ModelRegistry, PluginModelAndDatasetTrainThroughTheRunLoop) {
  register_test_plugin();
  const std::string dir = testing::temp_dir("model-registry");
  TrainRequest r;
  r.config_path = write_config(dir);
  r.output = dir + "/run";
  // Full batch (6 samples, micro batch 6): every step sees the whole set, whatever the order.
  r.overrides = {"xtrain.model.args.temperature=2", "xtrain.data.args.n=6", "xtrain.data.args.classes=3"};
  const TrainResult result = train(r);
  ASSERT_EQ(result.steps, 5);
  Reference ref{6, 3, 0.5, 2.0};
  double last = 0.0;
  for (int s = 0; s < 5; ++s) last = ref.loss_and_step(true);
  Reference fresh{6, 3, 0.5, 2.0};
  EXPECT_NEAR(std::log(3.0), fresh.loss_and_step(false), 1e-12);  // zero init: ln K
  // fp32 forward/backward against float64 over five steps: agreement to ~1e-6 relative.
  EXPECT_NEAR(result.final_train_loss, last, 2e-6 * last);
  const double after = ref.loss_and_step(false);
  EXPECT_NEAR(result.final_eval.loss, after, 2e-6 * after);
  EXPECT_LT(after, last);
}

std::string train_error(const std::vector<std::string>& overrides) {
  const std::string dir = testing::temp_dir("model-registry-bad");
  TrainRequest r;
  r.config_path = write_config(dir);
  r.output = dir + "/run";
  r.overrides = overrides;
  try {
    train(r);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

TEST(ModelRegistry, UnknownNamesAndBadArgsFailBeforeTraining) {
  register_test_plugin();
  const std::string model = train_error({"xtrain.model.type=test_sofmax"});
  EXPECT_NE(model.find("xtrain.model.type: unknown model \"test_sofmax\"; did you mean \"test_softmax\"?"),
            std::string::npos) << model;
  EXPECT_NE(model.find("registered: gpt, resnet18, mlp"), std::string::npos) << model;
  const std::string dataset = train_error({"xtrain.data.type=test_pionts"});
  EXPECT_NE(dataset.find("xtrain.data.type: unknown dataset \"test_pionts\"; did you mean \"test_points\"?"),
            std::string::npos) << dataset;
  const std::string args = train_error({"xtrain.model.args.temperature=-1"});
  EXPECT_NE(args.find("xtrain.model.args.temperature must be a number > 0, got -1"), std::string::npos) << args;
}

TEST(ModelRegistry, BuiltinsAreEntriesAndBuildModelFillsTaskAndOptions) {
  const auto names = model_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3), (std::vector<std::string>{"gpt", "resnet18", "mlp"}));
  EXPECT_EQ(find_model("gpt").task, "lm");
  EXPECT_EQ(find_model("mlp").task, "classify");
  register_test_plugin();
  ModelOptions o;
  o.type = "test_softmax";
  o.in_features = 2;
  o.num_classes = 4;
  const Model m = build_model(o);
  EXPECT_EQ(m.task, "classify");  // the entry's; the factory left it empty
  EXPECT_EQ(m.options.type, "test_softmax");
  EXPECT_EQ(m.forward(at::zeros({5, 2})).sizes(), (std::vector<int64_t>{5, 4}));
  const std::string md = models_markdown();
  EXPECT_NE(md.find("| `test_softmax` | classify | softmax regression (test) | `args.temperature` (divides the logits) |"),
            std::string::npos) << md;
}

TEST(ModelRegistry, BadEntriesAreRefusedAndUnknownNamesSuggest) {
  ModelEntry e;
  e.task = "lm";
  EXPECT_THROW(register_model("no_build", e), UsageError);
  e.build = [](const ModelOptions&) { return Model{}; };
  e.task = "regress";
  EXPECT_THROW(register_model("bad_task", e), UsageError);
  e.task = "lm";
  register_model("empty_model", e);
  ModelOptions o;
  o.type = "empty_model";
  EXPECT_THROW(build_model(o), UsageError);  // a factory that returns no module
  try {
    find_model("mpl");
    FAIL() << "no error";
  } catch (const UsageError& err) {
    EXPECT_NE(std::string(err.what()).find("did you mean \"mlp\"?"), std::string::npos) << err.what();
  }
}

TEST(ModelRegistry, ArgsAreAFreeJsonObject) {
  config::LoadOptions lo;
  lo.overrides = {"xtrain.model.args.width=64", "xtrain.model.args.act=gelu", "xtrain.data.args.files=[\"a\",\"b\"]"};
  const auto c = config::load_text("{}", lo).config;
  EXPECT_EQ(c.model.args, (nlohmann::json{{"width", 64}, {"act", "gelu"}}));
  EXPECT_EQ(c.data.args, (nlohmann::json{{"files", {"a", "b"}}}));
  EXPECT_EQ(config::load_text("{}", {}).config.model.args, nlohmann::json::object());
  try {
    config::load_text(R"({"xtrain": {"model": {"args": 3}}})", {});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.model.args must be an object"), std::string::npos) << e.what();
  }
  // The resolved config keeps them (a run's config.json reloads with the same args).
  EXPECT_NE(config::to_json(c).find("\"width\": 64"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::models::registry_test
