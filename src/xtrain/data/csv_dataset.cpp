// CSV tables for tabular classification (see csv_dataset.h).
#include "xtrain/data/csv_dataset.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/tensor.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::data {
namespace {

// One record from `text` at `pos` (advanced past its line end); false at the end of the text.
bool next_record(const std::string& text, size_t& pos, int64_t& line, std::vector<std::string>& fields,
                 const std::string& origin) {
  fields.clear();
  if (pos >= text.size()) return false;
  const int64_t start_line = line;
  std::string field;
  bool quoted = false;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c == '"' && pos < text.size() && text[pos] == '"') {
        field += '"';
        ++pos;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      ++line;
      break;
    } else if (c != '\r') {
      field += c;
    }
  }
  XTRAIN_USAGE_CHECK(!quoted, "data: ", origin, ":", start_line, ": a quoted field is not closed");
  fields.push_back(std::move(field));
  return true;
}

bool blank(const std::vector<std::string>& fields) { return fields.size() == 1 && fields[0].empty(); }

bool parse_number(const std::string& cell, double& out) {
  const size_t a = cell.find_first_not_of(" \t"), b = cell.find_last_not_of(" \t");
  if (a == std::string::npos) return false;
  const std::string s = cell.substr(a, b - a + 1);
  errno = 0;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE && std::isfinite(out);
}

int64_t column_of(const CsvTable& t, const std::string& name, const std::string& key, const std::string& origin) {
  const auto it = std::find(t.header.begin(), t.header.end(), name);
  XTRAIN_USAGE_CHECK(it != t.header.end(), "data: ", origin, " has no column \"", name, "\" (", key, ")",
                     did_you_mean_suffix(name, t.header));
  return it - t.header.begin();
}

// A fixed shuffle (splitmix64, seed 22, as text_classify) holds out round(fraction * N) rows; both
// parts keep file order.
std::pair<std::vector<int64_t>, std::vector<int64_t>> hold_out(int64_t n, double fraction) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  SplitMix64 rng{22};
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const auto n_val = static_cast<size_t>(std::llround(fraction * static_cast<double>(n)));
  std::vector<bool> is_val(static_cast<size_t>(n), false);
  for (size_t i = 0; i < n_val; ++i) is_val[static_cast<size_t>(order[i])] = true;
  std::pair<std::vector<int64_t>, std::vector<int64_t>> out;
  for (int64_t i = 0; i < n; ++i) (is_val[static_cast<size_t>(i)] ? out.second : out.first).push_back(i);
  return out;
}

at::Tensor index_tensor(const std::vector<int64_t>& rows) {
  return at::tensor(rows, at::TensorOptions().dtype(at::kLong));
}

}  // namespace

CsvTable parse_csv(const std::string& text, const std::string& origin) {
  CsvTable t;
  size_t pos = 0;
  int64_t line = 1;
  std::vector<std::string> fields;
  while (next_record(text, pos, line, fields, origin) && blank(fields)) {
  }
  XTRAIN_USAGE_CHECK(!fields.empty() && !blank(fields), "data: ", origin,
                     " is empty; a CSV needs a header row of column names and at least one data row");
  t.header = fields;
  int64_t row_line = line;
  while (next_record(text, pos, line, fields, origin)) {
    if (!blank(fields)) {
      XTRAIN_USAGE_CHECK(fields.size() == t.header.size(), "data: ", origin, ":", row_line, ": ", fields.size(),
                         " fields, the header has ", t.header.size());
      t.rows.push_back(fields);
      t.lines.push_back(row_line);
    }
    row_line = line;
  }
  XTRAIN_USAGE_CHECK(!t.rows.empty(), "data: ", origin, " has a header but no data rows");
  return t;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  XTRAIN_USAGE_CHECK(in.good(), "data: CSV file ", path, " not found or unreadable (xtrain.data.path)");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_csv(s.str(), path);
}

TabularColumns select_columns(const CsvTable& t, const std::string& label, const std::vector<std::string>& features,
                              const std::string& origin) {
  const int64_t label_col = column_of(t, label, "xtrain.data.label", origin);
  std::vector<int64_t> cols;
  TabularColumns out;
  for (const auto& name : features) cols.push_back(column_of(t, name, "xtrain.data.features", origin));
  if (features.empty()) {
    for (int64_t c = 0; c < static_cast<int64_t>(t.header.size()); ++c) {
      if (c != label_col) cols.push_back(c);
    }
  }
  XTRAIN_USAGE_CHECK(!cols.empty(), "data: ", origin, " has no feature column beside the label \"", label, "\"");
  for (int64_t c : cols) out.feature_names.push_back(t.header[static_cast<size_t>(c)]);
  const auto n = static_cast<int64_t>(t.rows.size()), f = static_cast<int64_t>(cols.size());
  std::vector<double> values(static_cast<size_t>(n * f));
  for (int64_t r = 0; r < n; ++r) {
    const auto& row = t.rows[static_cast<size_t>(r)];
    for (int64_t j = 0; j < f; ++j) {
      const auto& cell = row[static_cast<size_t>(cols[static_cast<size_t>(j)])];
      XTRAIN_USAGE_CHECK(parse_number(cell, values[static_cast<size_t>(r * f + j)]), "data: ", origin, ":",
                         t.lines[static_cast<size_t>(r)], ": column \"", out.feature_names[static_cast<size_t>(j)],
                         "\" holds \"", cell, "\", not a number (every feature must be numeric; drop the column ",
                         "from xtrain.data.features or encode it)");
    }
    out.labels.push_back(row[static_cast<size_t>(label_col)]);
  }
  out.features = at::from_blob(values.data(), {n, f}, at::TensorOptions().dtype(at::kDouble)).clone();
  return out;
}

std::vector<std::string> label_classes(const std::vector<std::string>& labels) {
  std::vector<std::string> classes(labels);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  double a = 0, b = 0;
  const bool numeric =
      std::all_of(classes.begin(), classes.end(), [&](const std::string& s) { return parse_number(s, a); });
  if (numeric) {
    std::stable_sort(classes.begin(), classes.end(), [&](const std::string& x, const std::string& y) {
      parse_number(x, a);
      parse_number(y, b);
      return a < b;
    });
  }
  return classes;
}

Standardization fit_standardization(const at::Tensor& x) {
  Standardization s;
  s.mean = x.mean(0);
  s.std = (x - s.mean).pow(2).mean(0).sqrt();
  s.std.masked_fill_(s.std.eq(0), 1.0);
  return s;
}

TabularDataset::TabularDataset(at::Tensor features, at::Tensor labels, std::vector<std::string> classes,
                               std::vector<std::pair<std::string, std::string>> run_files)
    : features_(std::move(features)), labels_(std::move(labels)), classes_(std::move(classes)),
      run_files_(std::move(run_files)) {}

std::string standardization_json(const std::vector<std::string>& features, const Standardization& s,
                                 const std::string& label, const std::vector<std::string>& classes) {
  const at::Tensor mean = s.mean.contiguous(), std = s.std.contiguous();
  const std::vector<double> m(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
  const std::vector<double> d(std.data_ptr<double>(), std.data_ptr<double>() + std.numel());
  return nlohmann::ordered_json{{"features", features}, {"mean", m}, {"std", d}, {"label", label},
                                {"classes", classes}}
             .dump(1) +
         "\n";
}

Batch TabularDataset::collate(const std::vector<int64_t>& indices) const {
  const at::Tensor idx = index_tensor(indices);
  return {at::index_select(features_, 0, idx), at::index_select(labels_, 0, idx)};
}

DatasetInfo TabularDataset::info() const {
  DatasetInfo i;
  i.kind = "tabular";
  i.num_classes = static_cast<int64_t>(classes_.size());
  i.sample_shape = {features_.size(1)};
  i.class_names = classes_;
  i.run_files = run_files_;
  return i;
}

void validate_csv_options(const DataOptions& o) {
  XTRAIN_USAGE_CHECK(!o.label.empty(), "data: xtrain.data.type csv needs xtrain.data.label, the label column's name");
  XTRAIN_USAGE_CHECK(o.val_fraction > 0.0 && o.val_fraction < 1.0, "data: xtrain.data.val_fraction must be in (0, 1), ",
                     "got ", o.val_fraction);
}

Splits open_csv_dataset(const DataOptions& o, int64_t /*seq_len*/, const std::string& cache_dir) {
  validate_csv_options(o);
  const std::string path = o.path == "breast_cancer" ? cache_dir + "/breast_cancer/breast_cancer.csv" : o.path;
  XTRAIN_USAGE_CHECK(o.path != "breast_cancer" || std::ifstream(path).good(), "data: ", path,
                     " is missing; scripts/fetch-data fetches the breast_cancer dataset");
  const TabularColumns cols = select_columns(read_csv(path), o.label, o.features, path);
  const auto classes = label_classes(cols.labels);
  std::vector<int64_t> label_index;
  for (const auto& l : cols.labels) {
    label_index.push_back(std::find(classes.begin(), classes.end(), l) - classes.begin());
  }
  const auto n = static_cast<int64_t>(cols.labels.size());
  const auto [train_rows, val_rows] = hold_out(n, o.val_fraction);
  XTRAIN_USAGE_CHECK(!train_rows.empty() && !val_rows.empty(), "data: ", path, " has ", n, " rows, too few to hold ",
                     "out xtrain.data.val_fraction=", o.val_fraction, " and keep some for training");
  const at::Tensor labels = at::tensor(label_index, at::TensorOptions().dtype(at::kLong));
  const at::Tensor train_idx = index_tensor(train_rows), val_idx = index_tensor(val_rows);
  const at::Tensor train_x = at::index_select(cols.features, 0, train_idx);
  const Standardization s = fit_standardization(train_x);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"standardization.json", standardization_json(cols.feature_names, s, o.label, classes)}};
  auto make = [&](const at::Tensor& x, const at::Tensor& idx) {
    return std::make_shared<TabularDataset>(((x - s.mean) / s.std).to(at::kFloat).contiguous(),
                                            at::index_select(labels, 0, idx), classes, files);
  };
  return {make(train_x, train_idx), make(at::index_select(cols.features, 0, val_idx), val_idx)};
}

}  // namespace xtrain::data
