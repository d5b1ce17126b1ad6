// TextClassifyDataset and its opener (see text_classify_dataset.h).
#include "xtrain/data/text_classify_dataset.h"

#include <ATen/Functions.h>
#include <c10/util/StringUtil.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "xtrain/base/error.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSpamHint = "run scripts/fetch-data (scripts/xtrain and scripts/test run it for you)";
constexpr int64_t kBytesPerToken = 32;  // a text's first T tokens are encoded from at most 32·T bytes

std::string where(const std::string& path, int64_t line) { return path + ":" + std::to_string(line); }

// The label as a string: strings as they are, integers in decimal; anything else is an error.
std::string label_text(const nlohmann::json& v, const std::string& field, const std::string& at) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  XTRAIN_USAGE_CHECK(false, "data: ", at, ": \"", field, "\" must be a string or an integer, got ", v.dump());
  return "";
}

LabelledText parse_row(const std::string& line, const JsonlFields& fields, const std::string& at) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    XTRAIN_USAGE_CHECK(false, "data: ", at, ": not valid JSON (", e.what(), ")");
  }
  XTRAIN_USAGE_CHECK(j.is_object(), "data: ", at, ": expected a JSON object {\"", fields.text, "\": ..., \"",
                     fields.label, "\": ...}");
  XTRAIN_USAGE_CHECK(j.contains(fields.text), "data: ", at, ": no \"", fields.text,
                     "\" field (set xtrain.data.args.text_field to the field holding the text)");
  XTRAIN_USAGE_CHECK(j[fields.text].is_string(), "data: ", at, ": \"", fields.text, "\" must be a string");
  XTRAIN_USAGE_CHECK(j.contains(fields.label), "data: ", at, ": no \"", fields.label,
                     "\" field (set xtrain.data.args.label_field to the field holding the label)");
  return {j[fields.text].get<std::string>(), label_text(j[fields.label], fields.label, at), 0};
}

bool is_integer(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  const size_t start = s[0] == '-' ? 1 : 0;
  return start < s.size() && std::all_of(s.begin() + start, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The first `limit` bytes of `text`, shortened to not end inside a UTF-8 sequence.
std::string_view utf8_prefix(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return std::string_view(text).substr(0, n);
}

std::string arg_string(const DataOptions& o, const char* key, const std::string& fallback) {
  if (!o.args.contains(key)) return fallback;
  XTRAIN_USAGE_CHECK(o.args[key].is_string(), "data: xtrain.data.args.", key, " must be a string, got ",
                     o.args[key].dump());
  return o.args[key].get<std::string>();
}

std::unique_ptr<Tokenizer> open_tokenizer(const DataOptions& o) {
  const std::string name = arg_string(o, "tokenizer", "byte");
  if (name == "byte" || name == "gpt2") {
    TokenizerSpec spec;
    spec.type = name;
    return make_tokenizer(spec);
  }
  XTRAIN_USAGE_CHECK(fs::is_directory(name), "data: xtrain.data.args.tokenizer \"", name,
                     "\" is not byte, gpt2 or a folder holding a saved tokenizer.json");
  return load_tokenizer(name);
}

// The training rows' split of a file without a val_path: a fixed shuffle (splitmix64, seed 22), the
// first round(val_fraction·N) rows of it held out, both parts back in file order.
std::pair<std::vector<LabelledText>, std::vector<LabelledText>> hold_out(std::vector<LabelledText> rows,
                                                                         double fraction) {
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  SplitMix64 rng{22};
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const auto n_val = static_cast<size_t>(std::llround(fraction * static_cast<double>(rows.size())));
  std::vector<bool> is_val(rows.size(), false);
  for (size_t i = 0; i < n_val; ++i) is_val[order[i]] = true;
  std::pair<std::vector<LabelledText>, std::vector<LabelledText>> out;
  for (size_t i = 0; i < rows.size(); ++i) (is_val[i] ? out.second : out.first).push_back(std::move(rows[i]));
  return out;
}

}  // namespace

std::vector<LabelledText> read_labelled_jsonl(const std::string& path, const JsonlFields& fields) {
  std::ifstream in(path, std::ios::binary);
  XTRAIN_USAGE_CHECK(in.good(), "data: JSONL file ", path, " not found or unreadable (xtrain.data.path)");
  std::vector<LabelledText> rows;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    rows.push_back(parse_row(line, fields, where(path, n)));
    rows.back().line = n;
  }
  XTRAIN_USAGE_CHECK(!rows.empty(), "data: JSONL file ", path, " holds no rows");
  return rows;
}

std::vector<std::string> label_set(const std::vector<LabelledText>& rows) {
  std::vector<std::string> labels;
  for (const auto& r : rows) labels.push_back(r.label);
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  if (std::all_of(labels.begin(), labels.end(), is_integer)) {
    std::sort(labels.begin(), labels.end(),
              [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  }
  return labels;
}

TextClassifyDataset::TextClassifyDataset(const std::vector<LabelledText>& rows, const std::vector<std::string>& classes,
                                         const Tokenizer& tokenizer, int64_t seq_len, const std::string& file)
    : vocab_(tokenizer.vocab_size()), classes_(classes) {
  XTRAIN_USAGE_CHECK(seq_len > 0, "data: text_classify needs xtrain.model.seq_len > 0, got ", seq_len);
  const auto n = static_cast<int64_t>(rows.size());
  tokens_ = at::full({n, seq_len}, -1, at::kLong);
  labels_ = at::empty({n}, at::kLong);
  auto tok = tokens_.accessor<int64_t, 2>();
  auto lab = labels_.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    const auto& r = rows[static_cast<size_t>(i)];
    const auto it = std::find(classes.begin(), classes.end(), r.label);
    XTRAIN_USAGE_CHECK(it != classes.end(), "data: ", where(file, r.line), ": label \"", r.label,
                       "\" is not one of the training file's labels (", c10::Join(", ", classes), ")");
    lab[i] = it - classes.begin();
    const auto ids = tokenizer.encode(utf8_prefix(r.text, static_cast<size_t>(kBytesPerToken * seq_len)));
    const auto len = std::min<int64_t>(seq_len, static_cast<int64_t>(ids.size()));
    for (int64_t t = 0; t < len; ++t) tok[i][t] = ids[static_cast<size_t>(t)];
  }
}

Batch TextClassifyDataset::collate(const std::vector<int64_t>& indices) const {
  const auto idx = at::tensor(indices, at::kLong);
  return {tokens_.index_select(0, idx), labels_.index_select(0, idx)};
}

DatasetInfo TextClassifyDataset::info() const {
  DatasetInfo i;
  i.kind = "text";
  i.vocab = vocab_;
  i.seq_len = tokens_.size(1);
  i.num_classes = static_cast<int64_t>(classes_.size());
  i.sample_shape = {tokens_.size(1)};
  i.class_names = classes_;
  return i;
}

void validate_text_classify_options(const DataOptions& o) {
  XTRAIN_USAGE_CHECK(o.args.is_object(), "data: xtrain.data.args must be a JSON object, got ", o.args.dump());
  static const std::vector<std::string> keys{"val_path", "tokenizer", "text_field", "label_field"};
  for (const auto& [key, value] : o.args.items()) {
    XTRAIN_USAGE_CHECK(std::find(keys.begin(), keys.end(), key) != keys.end(), "data: xtrain.data.args.", key,
                       " is not a text_classify setting (", c10::Join(", ", keys), ")");
    XTRAIN_USAGE_CHECK(value.is_string(), "data: xtrain.data.args.", key, " must be a string, got ", value.dump());
  }
  XTRAIN_USAGE_CHECK(o.path != "mobydick" && !o.path.empty(), "data: text_classify needs xtrain.data.path: a JSONL "
                     "file of {\"text\", \"label\"} rows, or spam_assassin (the built-in corpus)");
}

Splits open_text_classify_dataset(const DataOptions& o, int64_t seq_len, const std::string& cache_dir) {
  validate_text_classify_options(o);
  const JsonlFields fields{arg_string(o, "text_field", "text"), arg_string(o, "label_field", "label")};
  std::string train_path = o.path, val_path = arg_string(o, "val_path", "");
  if (o.path == "spam_assassin") {
    train_path = cache_dir + "/spam_assassin/train.jsonl";
    XTRAIN_USAGE_CHECK(fs::exists(train_path), "dataset 'spam_assassin' not found at ", train_path, ": ", kSpamHint);
    if (val_path.empty()) val_path = cache_dir + "/spam_assassin/val.jsonl";
  }
  auto train_rows = read_labelled_jsonl(train_path, fields);
  std::vector<LabelledText> val_rows;
  std::string val_file = val_path;
  if (val_path.empty()) {
    XTRAIN_USAGE_CHECK(o.val_fraction > 0.0 && o.val_fraction < 1.0,
                       "data: xtrain.data.val_fraction must be in (0, 1), got ", o.val_fraction);
    std::tie(train_rows, val_rows) = hold_out(std::move(train_rows), o.val_fraction);
    XTRAIN_USAGE_CHECK(!val_rows.empty() && !train_rows.empty(), "data: ", train_path, " has too few rows (",
                       train_rows.size() + val_rows.size(), ") to hold out xtrain.data.val_fraction=", o.val_fraction,
                       " for validation; add rows or give xtrain.data.args.val_path");
    val_file = train_path;
  } else {
    val_rows = read_labelled_jsonl(val_path, fields);
  }
  const auto classes = label_set(train_rows);
  XTRAIN_USAGE_CHECK(classes.size() >= 2, "data: ", train_path, " has a single label (\"", classes.front(),
                     "\"): classification needs at least 2");
  const auto tokenizer = open_tokenizer(o);
  Splits s;
  s.train = std::make_shared<TextClassifyDataset>(train_rows, classes, *tokenizer, seq_len, train_path);
  s.val = std::make_shared<TextClassifyDataset>(val_rows, classes, *tokenizer, seq_len, val_file);
  return s;
}

}  // namespace xtrain::data
