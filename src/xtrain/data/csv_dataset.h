// Tabular data from a CSV file with a header row (`xtrain.data.type: csv`): a named label column
// (xtrain.data.label) and numeric feature columns (xtrain.data.features; default every other
// column). Classes are the label column's distinct values (ascending numerically when all are
// numbers, else in byte order). A fixed shuffle (splitmix64, seed 22) holds out val_fraction of the
// rows. Features are standardised with the training rows' mean and population std (a constant
// column keeps std 1); validation uses the training statistics, so train, val and a later
// `xtrain eval` of the same file agree. Fields may be double-quoted (RFC 4180, "" inside quotes).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/data/dataset.h"

namespace xtrain::data {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> lines;  // 1-based line of each row, for errors
};

// UsageError naming the file for a missing or empty file, a header without columns, and
// file:line for a row whose field count differs from the header's or an unterminated quote.
CsvTable read_csv(const std::string& path);
CsvTable parse_csv(const std::string& text, const std::string& origin);

// The columns chosen from a table: features [N, F] (float64, as read) and each row's label.
struct TabularColumns {
  std::vector<std::string> feature_names;
  at::Tensor features;
  std::vector<std::string> labels;
};
// UsageError naming the column (with "did you mean") when `label` or a feature is not in the
// header, and origin:line with the column for a feature cell that is not a finite number.
TabularColumns select_columns(const CsvTable& table, const std::string& label, const std::vector<std::string>& features,
                              const std::string& origin);

// The distinct labels: ascending numerically when all parse as numbers, else in byte order.
std::vector<std::string> label_classes(const std::vector<std::string>& labels);

// Per-feature mean and population std (ddof 0) over the rows of `x` [N, F]; a zero std becomes 1.
struct Standardization {
  at::Tensor mean, std;  // float64 [F]
};
Standardization fit_standardization(const at::Tensor& x);

class TabularDataset final : public Dataset {
 public:
  // `features` float32 [N, F] (already standardised), `labels` int64 [N]; `run_files` for info().
  TabularDataset(at::Tensor features, at::Tensor labels, std::vector<std::string> classes,
                 std::vector<std::pair<std::string, std::string>> run_files = {});
  int64_t size() const override { return features_.size(0); }
  Batch collate(const std::vector<int64_t>& indices) const override;  // float [B, F], int64 [B]
  DatasetInfo info() const override;
  const at::Tensor& features() const { return features_; }
  const at::Tensor& labels() const { return labels_; }

 private:
  at::Tensor features_, labels_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, std::string>> run_files_;
};

// standardization.json: {"features": [...], "mean": [...], "std": [...], "label": ..., "classes": [...]}.
std::string standardization_json(const std::vector<std::string>& features, const Standardization& s,
                                 const std::string& label, const std::vector<std::string>& classes);

// The registry's opener: xtrain.data.path is a CSV file, or "breast_cancer" (the fetched
// Wisconsin diagnostic set, <cache_dir>/breast_cancer/breast_cancer.csv, label "malignant").
Splits open_csv_dataset(const DataOptions& options, int64_t seq_len, const std::string& cache_dir);
// Checks xtrain.data before any work: a label column named, val_fraction in (0, 1).
void validate_csv_options(const DataOptions& options);

}  // namespace xtrain::data
