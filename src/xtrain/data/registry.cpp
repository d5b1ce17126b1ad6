// The dataset registry (see registry.h) over base/registry.h, with the three built-in datasets
// (their openers are in datasets.cpp).
#include "xtrain/data/registry.h"

#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/base/registry.h"
#include "xtrain/config/config.h"
#include "xtrain/data/csv_dataset.h"
#include "xtrain/data/datasets.h"
#include "xtrain/data/text_classify_dataset.h"
#include "xtrain/data/token_dataset.h"

namespace xtrain::data {
namespace {

constexpr const char* kTypeKey = "xtrain.data.type";

DatasetEntry text_entry() {
  DatasetEntry e;
  e.description = "bytes of a text file (or the fetched Moby-Dick), windows of xtrain.model.seq_len + 1";
  e.task = "lm";
  e.open = open_text_dataset;
  e.keys = {{"path", ""}, {"val_fraction", ""}};
  return e;
}

DatasetEntry idx_entry(bool fashion) {
  DatasetEntry e;
  e.description = fashion ? "Fashion-MNIST (Debian's dataset-fashion-mnist, or IDX files under path)"
                          : "MNIST (fetched by scripts/fetch-data, or IDX files under path)";
  e.task = "classify";
  e.open = [fashion](const DataOptions& o, int64_t, const std::string& cache_dir) {
    return open_idx_dataset(o, cache_dir, fashion);
  };
  e.keys = {{"path", ""}};
  return e;
}

DatasetEntry tokens_entry() {
  DatasetEntry e;
  e.description = "token shards (llm.c format) from `xtrain data prepare`, llm.c or nanoGPT, read through mmap; "
                  "random windows of xtrain.model.seq_len + 1";
  e.task = "lm";
  e.open = open_token_dataset;
  e.keys = {{"path", "the shard folder"},
            {"args.format", "auto, llmc or nanogpt (raw uint16 train.bin, val.bin)"},
            {"args.vocab_size", "shards without manifest.json: the vocabulary (default GPT-2's 50257, 128256 for uint32)"},
            {"args.tokenizer", "byte, gpt2 or a folder with tokenizer.json, for shards without a saved tokenizer"}};
  e.validate = validate_token_options;
  return e;
}

DatasetEntry text_classify_entry() {
  DatasetEntry e;
  e.description = "labelled texts from JSONL ({\"text\", \"label\"} per line; or the fetched SpamAssassin corpus), "
                  "tokenized, truncated and padded to xtrain.model.seq_len";
  e.task = "classify";
  e.open = open_text_classify_dataset;
  e.keys = {{"path", "a JSONL file or spam_assassin"},
            {"val_fraction", "held out by a fixed shuffle when there is no args.val_path"},
            {"args.val_path", "validation JSONL"},
            {"args.tokenizer", "byte (default), gpt2, or a folder with a saved tokenizer.json"},
            {"args.text_field", "default text"},
            {"args.label_field", "default label"}};
  e.validate = validate_text_classify_options;
  return e;
}

DatasetEntry csv_entry() {
  DatasetEntry e;
  e.description = "a CSV table with a header: a label column and numeric features, standardised with the "
                  "training split's mean and std (or the fetched breast_cancer set)";
  e.task = "classify";
  e.open = open_csv_dataset;
  e.keys = {{"path", "a CSV file or breast_cancer"},
            {"label", "the label column"},
            {"features", "the feature columns (default: all others)"},
            {"val_fraction", "held out by a fixed shuffle"}};
  e.validate = validate_csv_options;
  return e;
}

Registry<DatasetEntry>& registry() {
  static auto* r = new Registry<DatasetEntry>("dataset", [](Registry<DatasetEntry>& reg) {
    reg.add("text", text_entry());
    reg.add("mnist", idx_entry(false));
    reg.add("fashion_mnist", idx_entry(true));
    reg.add("text_classify", text_classify_entry());
    reg.add("tokens", tokens_entry());
    reg.add("csv", csv_entry());
  });
  return *r;
}

std::string markdown(const std::vector<std::string>& names) {
  return "\n## Registered datasets (`xtrain.data.type`)\n\n"
         "The built-in datasets; a plugin library adds its own (`register_dataset`, data/registry.h) and\n"
         "reads its settings from `xtrain.data.args`.\n\n" +
         task_entries_table(registry(), names, kTypeKey, "xtrain.data.");
}

// docs/config.md lists the built-ins only: what a plugin or a test registers is not part of it.
std::string builtin_markdown() { return markdown({"text", "mnist", "fashion_mnist", "tokens", "text_classify", "csv"}); }
[[maybe_unused]] const bool kDocumented = config::add_reference_section(11, builtin_markdown);

}  // namespace

void register_dataset(const std::string& name, DatasetEntry entry) {
  check_task_entry("data: register_dataset", name, static_cast<bool>(entry.open), "an open", entry.task);
  registry().add(name, std::move(entry));
}

const DatasetEntry& find_dataset(const std::string& name) { return registry().find(name, kTypeKey); }

std::vector<std::string> dataset_names() { return registry().names(); }

void check_data_options(const DataOptions& options) {
  const DatasetEntry& e = registry().find_validated(options.type, kTypeKey, options);
  const bool reads_label =
      std::any_of(e.keys.begin(), e.keys.end(), [](const DatasetKey& k) { return k.key == "label"; });
  XTRAIN_USAGE_CHECK(reads_label || (options.label.empty() && options.features.empty()), "data: xtrain.data.label and ",
                     "xtrain.data.features are read by the csv dataset; xtrain.data.type \"", options.type,
                     "\" does not read them: remove them");
}

std::string datasets_markdown() { return markdown(dataset_names()); }

}  // namespace xtrain::data
