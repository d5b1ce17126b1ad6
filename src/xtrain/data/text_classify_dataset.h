// Text classification from JSONL (`xtrain.data.type: text_classify`): one {"text": ..., "label": ...}
// object per line, labels strings or integers. The class set is the training file's distinct labels
// in a fixed order (numeric when every label is an integer, else byte order), so train, val and a
// later `xtrain eval` agree on the index of each class. Each text is tokenized with the run's
// tokenizer (byte by default), truncated to the context length and right-padded with -1 (a model
// that reads this dataset treats ids < 0 as padding: models/gpt_classifier.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/data/dataset.h"
#include "xtrain/data/tokenizer/tokenizer.h"

namespace xtrain::data {

struct LabelledText {
  std::string text;
  std::string label;  // an integer label as its decimal form
  int64_t line = 0;   // 1-based line in its file, for errors
};

// The field names a JSONL file uses (xtrain.data.args.text_field / label_field).
struct JsonlFields {
  std::string text = "text";
  std::string label = "label";
};

// Every non-blank line of `path`. UsageError naming path:line for a line that is not a JSON object,
// a missing or non-string text field, a label that is neither a string nor an integer, and for a
// file that is missing or holds no rows.
std::vector<LabelledText> read_labelled_jsonl(const std::string& path, const JsonlFields& fields = {});

// The distinct labels of `rows`: ascending numerically when all are integers, else in byte order.
std::vector<std::string> label_set(const std::vector<LabelledText>& rows);

// Token ids [N, seq_len] (-1 = padding) and class indices [N]. A text's first seq_len tokens come
// from encoding at most 32 x seq_len bytes of it (cut at a UTF-8 boundary): long documents cost
// no more than short ones. UsageError naming `file`:line for a label outside `classes`.
class TextClassifyDataset final : public Dataset {
 public:
  TextClassifyDataset(const std::vector<LabelledText>& rows, const std::vector<std::string>& classes,
                      const Tokenizer& tokenizer, int64_t seq_len, const std::string& file);
  int64_t size() const override { return tokens_.size(0); }
  Batch collate(const std::vector<int64_t>& indices) const override;  // int64 [B, T], int64 [B]
  DatasetInfo info() const override;
  const at::Tensor& labels() const { return labels_; }

 private:
  at::Tensor tokens_, labels_;
  int64_t vocab_;
  std::vector<std::string> classes_;
};

// The registry's opener: xtrain.data.path is a JSONL file or "spam_assassin" (the fetched corpus:
// <cache_dir>/spam_assassin/{train,val}.jsonl); xtrain.data.args: val_path (a JSONL file; without
// it a fixed shuffle holds out val_fraction of the training rows), tokenizer ("byte", "gpt2", or a
// folder holding a saved tokenizer.json), text_field, label_field.
Splits open_text_classify_dataset(const DataOptions& options, int64_t seq_len, const std::string& cache_dir);
// Checks xtrain.data.args before any work: UsageError naming the key.
void validate_text_classify_options(const DataOptions& options);

}  // namespace xtrain::data
