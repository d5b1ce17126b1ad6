// The model registry: `xtrain.model.type` names an entry (a description, the task it trains on, a
// factory, the xtrain.model keys it reads). gpt, resnet18 and mlp are built-ins; a user's code or a
// plugin library (`xtrain train --plugin lib.so`) adds its own with one register_model call. Design
// choice: ModelOptions stays one plain struct; a model outside the repository reads its own settings
// from `xtrain.model.args`, a JSON object the config layer passes through unread and the entry's
// validate() checks. Public API: this header includes nothing internal beyond the model types.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "xtrain/models/factory.h"

namespace xtrain::models {

// One `xtrain.model.<key>` an entry reads, for docs/config.md ("layers", "args.width").
struct ModelKey {
  std::string key;
  std::string doc;
};

struct ModelEntry {
  std::string description;
  std::string task;  // "lm" (int64 [B, T] -> [B, T, V]) | "classify" ([B, ...] -> [B, classes])
  // Builds the model; deterministic given torch::manual_seed. The returned Model's task and options
  // may be left empty: build_model fills them from the entry and the options.
  std::function<Model(const ModelOptions&)> build;
  std::vector<ModelKey> keys;
  // Optional: checks the options before any work (`xtrain config`, `xtrain train`'s start-up
  // checks); throws UsageError naming the key. Sizes filled from the dataset (num_classes,
  // in_features) may still be 0 here.
  std::function<void(const ModelOptions&)> validate;
};

// Adds `name`, replacing an entry of that name. UsageError for an empty name, a missing factory or
// a task other than "lm" / "classify".
void register_model(const std::string& name, ModelEntry entry);
// The entry, or a UsageError naming xtrain.model.type, the closest registered name and the list.
const ModelEntry& find_model(const std::string& name);
// Every registered name, built-ins first, then in the order registered.
std::vector<std::string> model_names();

// The registry's checks of `xtrain.model`: a registered type, and the entry's validate().
void check_model_options(const ModelOptions& options);

// docs/config.md's "Registered models" section: each model, its task and the keys it reads.
std::string models_markdown();

}  // namespace xtrain::models
