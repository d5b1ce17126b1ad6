// The model registry (see registry.h) over base/registry.h; the built-in entries and their hooks
// are in builtin_entries.cpp.
#include "xtrain/models/registry.h"

#include "xtrain/base/error.h"
#include "xtrain/base/registry.h"
#include "xtrain/config/config.h"
#include "xtrain/models/builtin_entries.h"
#include "xtrain/models/gpt_classifier.h"
#include "xtrain/models/logistic.h"
#include "xtrain/models/vit.h"

namespace xtrain::models {
namespace {

constexpr const char* kTypeKey = "xtrain.model.type";

Registry<ModelEntry>& registry() {
  // Never destroyed: models may be built during static destruction (as the attention registry).
  static auto* r = new Registry<ModelEntry>("model", [](Registry<ModelEntry>& reg) {
    reg.add("gpt", gpt_entry());
    reg.add("resnet18", resnet18_entry());
    reg.add("mlp", mlp_entry());
    reg.add("gpt_classifier", gpt_classifier_entry());
    reg.add("logistic", logistic_entry());
    reg.add("vit", vit_entry());
  });
  return *r;
}

std::string markdown(const std::vector<std::string>& names) {
  return "\n## Registered models (`xtrain.model.type`)\n\n"
         "The built-in models; a plugin library adds its own (`register_model`, models/registry.h) and reads\n"
         "its settings from `xtrain.model.args`. The model's task must be its dataset's task.\n\n" +
         task_entries_table(registry(), names, kTypeKey, "xtrain.model.");
}

// docs/config.md lists the built-ins only: what a plugin or a test registers is not part of it.
std::string builtin_markdown() { return markdown({"gpt", "resnet18", "mlp", "gpt_classifier", "logistic", "vit"}); }
[[maybe_unused]] const bool kDocumented = config::add_reference_section(10, builtin_markdown);

}  // namespace

void register_model(const std::string& name, ModelEntry entry) {
  check_task_entry("models: register_model", name, static_cast<bool>(entry.build), "a build", entry.task);
  registry().add(name, std::move(entry));
}

void missing_capability(const std::string& type, const std::string& key, const std::string& what,
                        const std::string& hook_name) {
  XTRAIN_USAGE_ERROR("config: ", key, " needs a model that ", what, "; xtrain.model.type \"", type,
                     "\" does not (its ModelEntry::", hook_name, " is not set)");
}

const ModelEntry& check_tensor_parallel_model(const std::string& type) {
  return require_hook(type, &ModelEntry::tensor_parallel, "tensor_parallel", "tensor_parallel.size > 1",
               "splits over tensor-parallel ranks");
}

const ModelEntry& check_pipeline_model(const std::string& type) {
  return require_hook(type, &ModelEntry::pipeline_stage, "pipeline_stage", "pipeline.stages > 1",
               "splits into pipeline stages");
}

const ModelEntry& check_activation_checkpointing_model(const std::string& type) {
  return require_hook(type, &ModelEntry::checkpoint_activations, "checkpoint_activations", "activation_checkpointing.enabled",
               "checkpoints its activations");
}

const ModelEntry& find_model(const std::string& name) { return registry().find(name, kTypeKey); }

std::vector<std::string> model_names() { return registry().names(); }

void check_model_options(const ModelOptions& options) { registry().find_validated(options.type, kTypeKey, options); }

std::vector<int64_t> input_sample_shape(const ModelOptions& options) {
  return require_hook(options.type, &ModelEntry::sample_shape, "sample_shape", "xtrain export",
                      "gives its input's sample shape")
      .sample_shape(options);
}

std::string models_markdown() { return markdown(model_names()); }

}  // namespace xtrain::models
