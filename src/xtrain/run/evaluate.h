// Validation scoring for the training loop and `xtrain eval`: the mean loss over micro-batches
// drawn in one fixed shuffled order (the same samples every time), with the standard error of that
// mean estimated from the spread of the per-batch losses, so a score over a subset says how far it
// may be from the whole split's. Plain cross-entropy (no label smoothing): comparable across runs.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "xtrain/config/config.h"
#include "xtrain/data/dataset.h"
#include "xtrain/models/factory.h"

namespace xtrain {

struct EvalResult {
  double loss = 0.0;                 // mean per-token (LM) / per-sample loss over every sample scored
  // Standard error of the mean over batches: sample std of batch_losses (n - 1) / sqrt(n); NaN for
  // fewer than 2 batches.
  double loss_standard_error = 0.0;
  double accuracy = -1.0;            // classification only
  // Classification: confusion[t * classes + p] counts the samples of true class t predicted as p
  // (argmax of the logits); macro_f1 from it (class_metrics.h). classes 0 and macro_f1 -1 otherwise.
  int64_t classes = 0;
  std::vector<int64_t> confusion;
  double macro_f1 = -1.0;
  // Two classes: ROC AUC of the class-1 score (logit difference), exact (class_metrics.h binary_auc);
  // -1 otherwise, NaN when the scored samples hold one class only.
  double auc = -1.0;
  int64_t samples = 0;
  int64_t batches = 0;
  std::vector<double> batch_losses;  // each batch's mean loss, in scoring order
};

// Where an evaluation is, after each batch (for a progress line).
struct EvalProgress {
  int64_t batch = 0, batches = 0, samples = 0;
  double loss = 0.0, loss_standard_error = 0.0;  // over the batches so far
};
using EvalProgressFn = std::function<void(const EvalProgress&)>;

// Mean loss (and accuracy) over `batches` validation micro-batches in a fixed order; batches <= 0
// scores the whole split, the last batch partial when the split does not divide evenly.
EvalResult evaluate(const models::Model& model, const data::Dataset& dataset, const config::Config& config,
                    int64_t batches, const EvalProgressFn& progress = {});

// Mean and standard error of the mean (sample std with n - 1, over sqrt(n)) of `values`, in two
// passes; the error is NaN for fewer than 2 values.
struct MeanAndError {
  double mean = 0.0, standard_error = 0.0;
};
MeanAndError mean_and_standard_error(const std::vector<double>& values);

}  // namespace xtrain
