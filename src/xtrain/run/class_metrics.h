// Classification scores from a confusion matrix: accuracy, per-class precision / recall / F1 and
// macro-F1, with scikit-learn's conventions (precision_recall_fscore_support, average="macro",
// labels=None): the macro average runs over the classes that occur as a true or a predicted label,
// and a ratio with a zero denominator counts as 0. Also the matrix as a table for the end-of-run
// summary and as JSON for metrics.jsonl.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/monitor/metric_sink.h"

namespace xtrain {

struct ClassMetrics {
  double accuracy = 0.0;
  double macro_f1 = 0.0;
  std::vector<double> precision, recall, f1;  // per class
  std::vector<int64_t> support;               // true samples per class
};

// Adds (target, predicted) pairs (int64 [N] each, values in [0, classes)) to `confusion`
// (row = true class, column = predicted), sizing it to classes x classes on first use.
void add_to_confusion(std::vector<int64_t>& confusion, int64_t& classes, const at::Tensor& target,
                      const at::Tensor& predicted, int64_t num_classes);

// `confusion` is classes x classes, row-major; all zeros gives accuracy 0 and macro-F1 0.
ClassMetrics class_metrics(const std::vector<int64_t>& confusion, int64_t classes);

// Area under the ROC curve of binary `scores` (higher: more likely class 1) against `labels` (0/1):
// the probability that a random positive scores above a random negative, ties counting one half,
// computed exactly as the Mann-Whitney U over average ranks / (positives x negatives). NaN when
// either class is absent.
double binary_auc(const std::vector<double>& scores, const std::vector<int64_t>& labels);

// Appends each row's class-1 score (logits[:, 1] - logits[:, 0], monotone in its probability) and
// its target.
void append_binary_scores(const at::Tensor& logits, const at::Tensor& target, std::vector<double>& scores,
                          std::vector<int64_t>& labels);

// The matrix with a header row of predicted classes and each row's recall, precision and F1, one
// line per true class; `names` may be empty (the class numbers are shown).
std::string confusion_table(const std::vector<int64_t>& confusion, int64_t classes,
                            const std::vector<std::string>& names);

// {"labels": [...], "matrix": [[...], ...], "f1": [...]}: one JSON line for a metrics text event.
std::string confusion_json(const std::vector<int64_t>& confusion, int64_t classes,
                           const std::vector<std::string>& names);

// A classification evaluation's extras beside val/loss and val/accuracy: val/macro_f1 and the
// "val/confusion_matrix" text event (confusion_json). Nothing when `classes` is 0 (not classifying).
// `auc` >= 0 (two classes) also writes val/auc.
void write_class_scores(monitor::MetricSink& sink, int64_t step, int64_t classes, const std::vector<int64_t>& confusion,
                        double macro_f1, const std::vector<std::string>& names, double auc = -1.0);

}  // namespace xtrain
