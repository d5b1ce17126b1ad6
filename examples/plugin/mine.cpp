// A plugin for `xtrain --plugin libmine.so`: the model "mine" (a two-layer perceptron) and the
// dataset "mine" (Gaussian blobs: one centre per class, unit noise), registered by name so that
// `--set xtrain.model.type=mine --set xtrain.data.type=mine` trains them with every CLI feature
// (ZeRO, bf16, checkpoints, tune). "mine" is a Sequential of known layers, so compress and export
// can trace it; "mine_opaque" is the same network as the user's own Module subclass: it trains,
// and compress/export refuse it by name. Settings come from xtrain.model.args / xtrain.data.args.
// xtrain calls xtrain_plugin_init() once after opening the library (base/plugin.h).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/tensor.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/data/registry.h"
#include "xtrain/models/registry.h"

namespace {

int64_t positive_arg(const nlohmann::json& args, const char* key, int64_t fallback, const std::string& where) {
  XTRAIN_USAGE_CHECK(args.is_object(), "config: ", where, " must be an object, got ", args.dump());
  if (!args.contains(key)) return fallback;
  const auto& v = args.at(key);
  XTRAIN_USAGE_CHECK(v.is_number_integer() && v.get<int64_t>() > 0, "config: ", where, ".", key,
                     " must be a positive integer, got ", v.dump());
  return v.get<int64_t>();
}

// The user's model: [B, F] -> [B, classes].
struct MineNet : torch::nn::Module {
  MineNet(int64_t in, int64_t hidden, int64_t classes)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, classes))) {}
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(at::relu(fc1->forward(x.flatten(1)))); }
  torch::nn::Linear fc1, fc2;
};

// The user's dataset: `count` samples; the class centres depend on `seed` only, so train and val
// share them, and `offset` keeps the two splits' noise apart.
class Blobs : public xtrain::data::Dataset {
 public:
  Blobs(int64_t count, int64_t features, int64_t classes, uint64_t offset) : classes_(classes) {
    at::Generator centres_gen = at::detail::createCPUGenerator(42);
    const at::Tensor centres = at::randn({classes, features}, centres_gen).mul(0.35);  // overlapping classes
    at::Generator gen = at::detail::createCPUGenerator(1000 + offset);
    labels_ = at::arange(count, at::kLong).remainder(classes);
    inputs_ = centres.index_select(0, labels_).add(at::randn({count, features}, gen));
  }
  int64_t size() const override { return labels_.size(0); }
  xtrain::data::Batch collate(const std::vector<int64_t>& indices) const override {
    const at::Tensor idx = at::tensor(indices, at::kLong);
    return {inputs_.index_select(0, idx), labels_.index_select(0, idx)};
  }
  xtrain::data::DatasetInfo info() const override {
    xtrain::data::DatasetInfo i;
    i.kind = "image";  // a classification dataset: float [B, F] inputs, int64 [B] labels
    i.num_classes = classes_;
    i.sample_shape = {inputs_.size(1)};
    return i;
  }

 private:
  int64_t classes_;
  at::Tensor inputs_, labels_;
};

// A Module subclass the tracer does not know (compress/export name it and stop).
std::shared_ptr<torch::nn::Module> opaque(int64_t in, int64_t hidden, int64_t classes) {
  return std::make_shared<MineNet>(in, hidden, classes);
}

// Linear, ReLU, Linear as a Sequential: the tracer knows each layer.
std::shared_ptr<torch::nn::Module> sequential(int64_t in, int64_t hidden, int64_t classes) {
  torch::nn::Sequential net(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, classes));
  return net.ptr();
}

xtrain::models::ModelEntry model_entry(bool traceable) {
  xtrain::models::ModelEntry e;
  e.description = std::string("examples/plugin: a two-layer perceptron (Linear, ReLU, Linear)") +
                  (traceable ? ", a Sequential" : ", its own Module class (not traceable)");
  e.task = "classify";
  e.keys = {{"args.hidden", "hidden width (default 32)"}};
  e.validate = [](const xtrain::models::ModelOptions& o) { positive_arg(o.args, "hidden", 32, "xtrain.model.args"); };
  // One input sample's shape (no batch dimension): `xtrain export` traces the model with it.
  e.sample_shape = [](const xtrain::models::ModelOptions& o) { return std::vector<int64_t>{o.in_features}; };
  e.build = [traceable](const xtrain::models::ModelOptions& o) {
    const int64_t hidden = positive_arg(o.args, "hidden", 32, "xtrain.model.args");
    xtrain::models::Model m;
    m.module = traceable ? sequential(o.in_features, hidden, o.num_classes)
                         : opaque(o.in_features, hidden, o.num_classes);
    if (traceable) {
      auto net = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(m.module);
      m.forward = [net](const at::Tensor& x) { return net->forward(x.flatten(1)); };
    } else {
      auto net = std::dynamic_pointer_cast<MineNet>(m.module);
      m.forward = [net](const at::Tensor& x) { return net->forward(x); };
    }
    return m;
  };
  return e;
}

xtrain::data::DatasetEntry dataset_entry() {
  xtrain::data::DatasetEntry e;
  e.description = "examples/plugin: Gaussian blobs, one centre per class";
  e.task = "classify";
  e.keys = {{"args.features", "input size (default 16)"},
            {"args.classes", "classes (default 4)"},
            {"args.samples", "training samples (default 2048; validation: a quarter)"}};
  e.validate = [](const xtrain::data::DataOptions& o) {
    for (const char* k : {"features", "classes", "samples"}) positive_arg(o.args, k, 1, "xtrain.data.args");
  };
  e.open = [](const xtrain::data::DataOptions& o, int64_t /*seq_len*/, const std::string& /*cache_dir*/) {
    const int64_t f = positive_arg(o.args, "features", 16, "xtrain.data.args");
    const int64_t c = positive_arg(o.args, "classes", 4, "xtrain.data.args");
    const int64_t n = positive_arg(o.args, "samples", 2048, "xtrain.data.args");
    return xtrain::data::Splits{std::make_shared<Blobs>(n, f, c, 1), std::make_shared<Blobs>(n / 4 + 1, f, c, 2)};
  };
  return e;
}

}  // namespace

extern "C" void xtrain_plugin_init() {
  xtrain::models::register_model("mine", model_entry(/*traceable=*/true));
  xtrain::models::register_model("mine_opaque", model_entry(/*traceable=*/false));
  xtrain::data::register_dataset("mine", dataset_entry());
}
