// Confusion-matrix scores (see class_metrics.h).
#include "xtrain/run/class_metrics.h"

#include <ATen/ops/bincount.h>
#include <c10/util/StringUtil.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "xtrain/base/error.h"

namespace xtrain {
namespace {

double ratio(int64_t num, int64_t den) { return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den); }

std::vector<std::string> labels_of(int64_t classes, const std::vector<std::string>& names) {
  if (static_cast<int64_t>(names.size()) == classes) return names;
  std::vector<std::string> out;
  for (int64_t c = 0; c < classes; ++c) out.push_back(std::to_string(c));
  return out;
}

std::string cell(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

void add_to_confusion(std::vector<int64_t>& confusion, int64_t& classes, const at::Tensor& target,
                      const at::Tensor& predicted, int64_t num_classes) {
  if (classes == 0) {
    classes = num_classes;
    confusion.assign(static_cast<size_t>(classes * classes), 0);
  }
  TORCH_INTERNAL_ASSERT(classes == num_classes, "add_to_confusion: ", num_classes, " classes, the matrix has ", classes);
  XTRAIN_USAGE_CHECK(target.numel() == 0 || (target.min().item<int64_t>() >= 0 && target.max().item<int64_t>() < classes),
                     "eval: a target label lies outside [0, ", classes, ") (the model's xtrain.model.num_classes)");
  const auto pairs = (target.to(at::kLong) * classes + predicted.to(at::kLong)).flatten();
  const auto counts = at::bincount(pairs, {}, classes * classes).to(at::kLong).contiguous();
  const auto* c = counts.data_ptr<int64_t>();
  for (int64_t i = 0; i < classes * classes; ++i) confusion[static_cast<size_t>(i)] += c[i];
}

ClassMetrics class_metrics(const std::vector<int64_t>& m, int64_t classes) {
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(m.size()) == classes * classes, "class_metrics: matrix of ", m.size(),
                        " cells for ", classes, " classes");
  ClassMetrics r;
  int64_t total = 0, correct = 0, present = 0;
  double f1_sum = 0.0;
  for (int64_t k = 0; k < classes; ++k) {
    int64_t row = 0, col = 0;
    for (int64_t j = 0; j < classes; ++j) {
      row += m[static_cast<size_t>(k * classes + j)];
      col += m[static_cast<size_t>(j * classes + k)];
    }
    const int64_t tp = m[static_cast<size_t>(k * classes + k)];
    r.precision.push_back(ratio(tp, col));
    r.recall.push_back(ratio(tp, row));
    r.f1.push_back(ratio(2 * tp, row + col));  // 2TP / (2TP + FP + FN)
    r.support.push_back(row);
    total += row;
    correct += tp;
    if (row + col > 0) {
      ++present;
      f1_sum += r.f1.back();
    }
  }
  r.accuracy = ratio(correct, total);
  r.macro_f1 = present == 0 ? 0.0 : f1_sum / static_cast<double>(present);
  return r;
}

double binary_auc(const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  TORCH_INTERNAL_ASSERT(scores.size() == labels.size(), "binary_auc: ", scores.size(), " scores, ", labels.size(),
                        " labels");
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double positive_rank_sum = 0.0;
  int64_t positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double rank = 0.5 * static_cast<double>(i + 1 + j);  // average of ranks i + 1 .. j
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] == 1) {
        positive_rank_sum += rank;
        ++positives;
      }
    }
    i = j;
  }
  const auto negatives = static_cast<int64_t>(labels.size()) - positives;
  if (positives == 0 || negatives == 0) return NAN;
  const double u = positive_rank_sum - 0.5 * static_cast<double>(positives) * static_cast<double>(positives + 1);
  return u / (static_cast<double>(positives) * static_cast<double>(negatives));
}

void append_binary_scores(const at::Tensor& logits, const at::Tensor& target, std::vector<double>& scores,
                          std::vector<int64_t>& labels) {
  const at::Tensor diff = (logits.select(-1, 1).to(at::kDouble) - logits.select(-1, 0).to(at::kDouble)).contiguous();
  const at::Tensor t = target.to(at::kLong).contiguous();
  scores.insert(scores.end(), diff.data_ptr<double>(), diff.data_ptr<double>() + diff.numel());
  labels.insert(labels.end(), t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

std::string confusion_table(const std::vector<int64_t>& m, int64_t classes, const std::vector<std::string>& names) {
  const auto labels = labels_of(classes, names);
  const auto scores = class_metrics(m, classes);
  size_t width = 9;
  for (const auto& l : labels) width = std::max(width, l.size() + 1);
  std::string out = cell("true \\ predicted", width + 7);
  for (const auto& l : labels) out += cell(l, width);
  out += cell("recall", 9) + cell("precision", 10) + cell("F1", 7) + "\n";
  for (int64_t t = 0; t < classes; ++t) {
    out += cell(labels[static_cast<size_t>(t)], width + 7);
    for (int64_t p = 0; p < classes; ++p) out += cell(std::to_string(m[static_cast<size_t>(t * classes + p)]), width);
    const auto k = static_cast<size_t>(t);
    out += cell(fixed3(scores.recall[k]), 9) + cell(fixed3(scores.precision[k]), 10) + cell(fixed3(scores.f1[k]), 7);
    if (t + 1 < classes) out += "\n";
  }
  return out;
}

std::string confusion_json(const std::vector<int64_t>& m, int64_t classes, const std::vector<std::string>& names) {
  nlohmann::json matrix = nlohmann::json::array();
  for (int64_t t = 0; t < classes; ++t) {
    matrix.push_back(std::vector<int64_t>(m.begin() + t * classes, m.begin() + (t + 1) * classes));
  }
  const auto scores = class_metrics(m, classes);
  return nlohmann::json{{"labels", labels_of(classes, names)}, {"matrix", matrix}, {"f1", scores.f1}}.dump();
}

void write_class_scores(monitor::MetricSink& sink, int64_t step, int64_t classes, const std::vector<int64_t>& confusion,
                        double macro_f1, const std::vector<std::string>& names, double auc) {
  if (classes == 0) return;
  sink.write(step, {{"val/macro_f1", macro_f1}});
  if (auc >= 0) sink.write(step, {{"val/auc", auc}});
  sink.write_text(step, "val/confusion_matrix", confusion_json(confusion, classes, names));
}

}  // namespace xtrain
