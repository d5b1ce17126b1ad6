#include "xtrain/run/evaluate.h"

#include <ATen/Functions.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

#include "xtrain/data/sampler.h"
#include "xtrain/nn/losses.h"
#include "xtrain/run/class_metrics.h"

namespace xtrain {

MeanAndError mean_and_standard_error(const std::vector<double>& values) {
  MeanAndError r;
  const auto n = static_cast<double>(values.size());
  if (values.empty()) return {NAN, NAN};
  for (double v : values) r.mean += v;
  r.mean /= n;
  if (values.size() < 2) return {r.mean, NAN};
  double squares = 0.0;
  for (double v : values) squares += (v - r.mean) * (v - r.mean);
  r.standard_error = std::sqrt(squares / (n - 1.0)) / std::sqrt(n);
  return r;
}

namespace {

// Welford's running mean and variance, for the progress line (O(1) per batch).
struct Running {
  int64_t n = 0;
  double mean = 0.0, m2 = 0.0;
  void add(double x) {
    n += 1;
    const double d = x - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (x - mean);
  }
  double standard_error() const { return n < 2 ? NAN : std::sqrt(m2 / (n - 1) / n); }
};

}  // namespace

EvalResult evaluate(const models::Model& model, const data::Dataset& dataset, const config::Config& config,
                    int64_t batches, const EvalProgressFn& progress) {
  at::NoGradGuard no_grad;
  const bool was_training = model.module->is_training();
  model.module->eval();
  const int64_t micro = *config.engine.train_micro_batch_size_per_gpu;
  // A fixed, shuffled order (same seed every time) so repeated evaluations see the same samples.
  const auto sampler = dataset.make_sampler(/*seed=*/0x5eed, 0, 1);
  const int64_t whole = (dataset.size() + micro - 1) / micro;  // the last one partial
  const int64_t n = batches <= 0 ? whole : std::min(batches, dataset.size() / micro);
  auto loss_fn = nn::make_loss(nn::LossOptions{});  // plain cross-entropy: comparable across runs
  // Image inputs follow the parameters' dtype (a bf16-trained model evaluates in bf16).
  const auto params = model.module->parameters();
  const auto dtype = params.empty() ? at::kFloat : params.front().scalar_type();
  EvalResult r;
  double weighted_sum = 0.0;  // sum of batch loss x batch size: a partial batch counts by its size
  int64_t correct = 0;
  std::vector<double> scores;  // two classes: each sample's class-1 score, for the AUC
  std::vector<int64_t> labels;
  Running running;
  for (int64_t i = 0; i < n; ++i) {
    auto batch = dataset.collate(sampler->next(std::min(micro, dataset.size() - i * micro)));
    if (at::isFloatingType(batch.input.scalar_type()) && batch.input.scalar_type() != dtype) {
      batch.input = batch.input.to(dtype);
    }
    const auto logits = model.forward(batch.input);
    const double loss = loss_fn(logits, batch.target).item<double>();
    if (model.task == "classify") {
      const auto predicted = logits.argmax(-1);
      correct += predicted.eq(batch.target).sum().item<int64_t>();
      add_to_confusion(r.confusion, r.classes, batch.target, predicted, logits.size(-1));
      if (logits.size(-1) == 2) append_binary_scores(logits, batch.target, scores, labels);
    }
    r.batch_losses.push_back(loss);
    r.samples += batch.size();
    weighted_sum += loss * static_cast<double>(batch.size());
    running.add(loss);
    if (progress) progress({i + 1, n, r.samples, weighted_sum / r.samples, running.standard_error()});
  }
  r.batches = n;
  r.loss = r.samples > 0 ? weighted_sum / static_cast<double>(r.samples) : NAN;
  r.loss_standard_error = mean_and_standard_error(r.batch_losses).standard_error;
  if (model.task == "classify" && r.samples > 0) {
    r.accuracy = static_cast<double>(correct) / r.samples;
    r.macro_f1 = class_metrics(r.confusion, r.classes).macro_f1;
    if (r.classes == 2) r.auc = binary_auc(scores, labels);
  }
  model.module->train(was_training);
  return r;
}

}  // namespace xtrain
