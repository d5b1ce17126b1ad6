// The dataset registry: `xtrain.data.type` names an entry (a description, the task its batches
// feed, a function that opens the train/val splits, the xtrain.data keys it reads). text, mnist and
// fashion_mnist are built-ins; a user's code or a plugin library adds its own with one
// register_dataset call and reads its settings from `xtrain.data.args` (a JSON object the config
// layer passes through unread; the entry's validate() checks it). Public API: includes only the
// dataset types.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/data/dataset.h"

namespace xtrain::data {

// One `xtrain.data.<key>` an entry reads, for docs/config.md ("path", "args.size").
struct DatasetKey {
  std::string key;
  std::string doc;
};

struct DatasetEntry {
  std::string description;
  // The model task its batches feed: "lm" (int64 [B, T] input and target, DatasetInfo kind "text")
  // or "classify" (float [B, ...] input, int64 [B] target, DatasetInfo kind "image").
  std::string task;
  // seq_len: the model's context (xtrain.model.seq_len); cache_dir: $XTRAIN_DATA_DIR or
  // ~/.cache/xtrain/data. Returns both splits; UsageError for missing files or bad settings.
  std::function<Splits(const DataOptions& options, int64_t seq_len, const std::string& cache_dir)> open;
  std::vector<DatasetKey> keys;
  // Optional: checks the options before any work; throws UsageError naming the key.
  std::function<void(const DataOptions&)> validate;
};

// Adds `name`, replacing an entry of that name. UsageError for an empty name, a missing open
// function or a task other than "lm" / "classify".
void register_dataset(const std::string& name, DatasetEntry entry);
// The entry, or a UsageError naming xtrain.data.type, the closest registered name and the list.
const DatasetEntry& find_dataset(const std::string& name);
// Every registered name, built-ins first, then in the order registered.
std::vector<std::string> dataset_names();

// The registry's checks of `xtrain.data`: a registered type, and the entry's validate().
void check_data_options(const DataOptions& options);

// docs/config.md's "Registered datasets" section: each dataset, its task and the keys it reads.
std::string datasets_markdown();

}  // namespace xtrain::data
