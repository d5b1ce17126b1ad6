// compress_model: what `xtrain compress` does to a trained model, in the order of compress.json's
// sections: distillation (teacher → a smaller student) → pruning (unstructured masks or structured
// channels, then fine-tuning with masks re-applied after every step, gradual per Zhu & Gupta) →
// quantisation (PTQ calibration, or QAT fine-tuning, then int8 conversion), measuring before and
// after. Design choice: data, evaluation and the student's construction come in as callbacks, so
// this area needs neither the engine nor the config reader (the CLI wires them; tests pass lambdas).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/compress/graph/trace.h"
#include "xtrain/compress/options.h"
#include "xtrain/compress/prune/channel_prune.h"
#include "xtrain/compress/quant/quantize.h"
#include "xtrain/compress/report.h"
#include "xtrain/data/batch.h"
#include "xtrain/models/factory.h"

namespace xtrain::compress {

struct CompressHooks {
  std::function<data::Batch(int64_t i)> train_batch;        // i-th training micro-batch (fine-tuning)
  std::function<at::Tensor(int64_t i)> calibration_input;   // i-th calibration input
  // Validation loss (and accuracy, < 0 for a language model) of a model's forward.
  std::function<std::pair<double, double>(const models::Model&)> evaluate;
  std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& target)> loss;
  std::function<models::Model()> build_student;             // distillation
  at::Tensor latency_input;                                 // one timed forward's input
  double default_lr = 1e-4;                                 // the run's learning rate (fine-tune lr 0: a tenth)
  TraceHints hints;
  std::function<void(const std::string&)> log;              // progress lines (may be empty)
};

struct CompressResult {
  models::Model model;                 // the compressed model (forward: int8 graph when quantised)
  std::shared_ptr<Graph> graph;        // traced compressed model
  std::shared_ptr<QuantPlan> plan;     // converted, or null
  ChannelPruneReport channels;         // structured pruning
  std::vector<ModelStats> stats;       // before, after each stage
  std::string summary;                 // format_summary(stats)
};

// `model` is changed in place (pruning, fine-tuning); the teacher for distillation is `model` itself.
CompressResult compress_model(const models::Model& model, const CompressOptions& options, const CompressHooks& hooks);

// Size, parameters, sparsity, loss/accuracy and latency of a model (plan: converted or null).
ModelStats measure(const std::string& label, const models::Model& model, const Graph& graph, const QuantPlan* plan,
                   const CompressHooks& hooks, int64_t latency_repeats);

// Plain fine-tuning with AdamW (LibTorch's) at a constant lr: `steps` micro-batches, `after_step`
// after every optimizer step (mask re-application, the gradual schedule). Returns the last loss.
double fine_tune(const models::Model& model, int64_t steps, double lr, const CompressHooks& hooks,
                 const std::function<at::Tensor(const data::Batch&)>& loss_of,
                 const std::function<void(int64_t step)>& after_step = nullptr);

}  // namespace xtrain::compress
