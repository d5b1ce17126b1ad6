// The model registry (see registry.h) over base/registry.h, with the three built-in assemblies.
// Built-ins check the sizes the dataset fills (num_classes, in_features) when they build, not in
// validate(): at config time those may still be 0.
#include "xtrain/models/registry.h"

#include "xtrain/base/error.h"
#include "xtrain/base/registry.h"
#include "xtrain/config/config.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_classifier.h"
#include "xtrain/models/mlp_classifier.h"
#include "xtrain/models/resnet.h"

namespace xtrain::models {
namespace {

constexpr const char* kTypeKey = "xtrain.model.type";

void need_num_classes(const ModelOptions& o) {
  XTRAIN_USAGE_CHECK(o.num_classes > 0, "models: ", o.type,
                     " needs xtrain.model.num_classes > 0 (set it or use an image dataset), got ", o.num_classes);
}

ModelEntry gpt_entry() {
  ModelEntry e;
  e.description = "GPT-2 layout (nanoGPT): token + position embeddings, pre-LN blocks, tied LM head";
  e.task = "lm";
  e.build = [](const ModelOptions& o) {
    auto gpt = GPT(o).ptr();
    return Model{gpt, [gpt](const at::Tensor& idx) { return gpt->forward(idx); }, "lm", o};
  };
  e.keys = {{"layers", ""}, {"d_model", ""}, {"heads", ""}, {"seq_len", ""}, {"vocab", ""},
            {"dropout", ""}, {"tie_embeddings", ""}, {"attention", ""}};
  return e;
}

ModelEntry resnet18_entry() {
  ModelEntry e;
  e.description = "ResNet-18, CIFAR-style stem, 1-channel input";
  e.task = "classify";
  e.build = [](const ModelOptions& o) {
    need_num_classes(o);
    auto resnet = ResNet18(o.num_classes).ptr();
    return Model{resnet, [resnet](const at::Tensor& x) { return resnet->forward(x); }, "classify", o};
  };
  e.keys = {{"num_classes", ""}};
  return e;
}

ModelEntry mlp_entry() {
  ModelEntry e;
  e.description = "multi-layer perceptron over the flattened sample";
  e.task = "classify";
  e.build = [](const ModelOptions& o) {
    need_num_classes(o);
    XTRAIN_USAGE_CHECK(o.in_features > 0, "models: mlp needs xtrain.model.in_features > 0 (set it or use an image "
                       "dataset), got ", o.in_features);
    auto mlp = MlpClassifier(o.in_features, o.hidden, o.num_classes, o.dropout).ptr();
    return Model{mlp, [mlp](const at::Tensor& x) { return mlp->forward(x); }, "classify", o};
  };
  e.keys = {{"hidden", ""}, {"dropout", ""}, {"num_classes", ""}, {"in_features", ""}};
  return e;
}

void check_entry(const std::string& name, const ModelEntry& e) {
  XTRAIN_USAGE_CHECK(static_cast<bool>(e.build), "models: register_model(\"", name, "\") needs a build function");
  XTRAIN_USAGE_CHECK(e.task == "lm" || e.task == "classify", "models: register_model(\"", name,
                     "\"): task must be \"lm\" or \"classify\", got \"", e.task, "\"");
}

Registry<ModelEntry>& registry() {
  // Never destroyed: models may be built during static destruction (as the attention registry).
  static auto* r = new Registry<ModelEntry>("model", [](Registry<ModelEntry>& reg) {
    reg.add("gpt", gpt_entry());
    reg.add("resnet18", resnet18_entry());
    reg.add("mlp", mlp_entry());
    reg.add("gpt_classifier", gpt_classifier_entry());
  });
  return *r;
}

std::string markdown(const std::vector<std::string>& names) {
  std::string md = "\n## Registered models (`xtrain.model.type`)\n\n"
                   "The built-in models; a plugin library adds its own (`register_model`, models/registry.h) and reads\n"
                   "its settings from `xtrain.model.args`. The model's task must be its dataset's task.\n\n"
                   "| name | task | description | keys read (`xtrain.model.`) |\n|---|---|---|---|\n";
  for (const auto& name : names) {
    const ModelEntry& e = registry().find(name, kTypeKey);
    std::string keys;
    for (const auto& k : e.keys) keys += (keys.empty() ? "`" : ", `") + k.key + "`" + (k.doc.empty() ? "" : " (" + k.doc + ")");
    md += "| `" + name + "` | " + e.task + " | " + e.description + " | " + keys + " |\n";
  }
  return md;
}

// docs/config.md lists the built-ins only: what a plugin or a test registers is not part of it.
std::string builtin_markdown() { return markdown({"gpt", "resnet18", "mlp", "gpt_classifier"}); }
[[maybe_unused]] const bool kDocumented = config::add_reference_section(10, builtin_markdown);

}  // namespace

void register_model(const std::string& name, ModelEntry entry) {
  check_entry(name, entry);
  registry().add(name, std::move(entry));
}

const ModelEntry& find_model(const std::string& name) { return registry().find(name, kTypeKey); }

std::vector<std::string> model_names() { return registry().names(); }

void check_model_options(const ModelOptions& options) {
  const ModelEntry& entry = find_model(options.type);
  if (entry.validate) entry.validate(options);
}

std::string models_markdown() { return markdown(model_names()); }

}  // namespace xtrain::models
