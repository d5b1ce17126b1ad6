// What a run trains for: language modelling or classification, as objects, so the run loop has no
// branch on the model or data type. A task fills the model's data-given sizes, names the unit of
// throughput (tokens / samples) and its FLOPs, describes a validation score, and says whether the
// run ends with a text sample. The model registry's entry names the task (models::ModelEntry::task:
// "lm" | "classify"); a dataset feeds one task (data::DatasetEntry::task).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "xtrain/data/batch.h"
#include "xtrain/data/dataset.h"
#include "xtrain/models/options.h"
#include "xtrain/run/evaluate.h"

namespace xtrain {

class Task {
 public:
  virtual ~Task() = default;
  virtual const char* name() const = 0;  // "lm" | "classify" (models::Model::task)
  // The model's sizes the data decides (vocabulary; classes, input size left at 0).
  virtual void fit_model(models::ModelOptions& model, const data::DatasetInfo& data) const = 0;
  // Throughput: the unit ("tokens" | "samples"), its short form on the progress line, and how many
  // a sample of `seq_len` holds / a batch holds.
  virtual const char* unit() const = 0;
  virtual const char* short_unit() const = 0;
  virtual double units_per_sample(int64_t seq_len) const = 0;
  virtual double units_of(const data::Batch& batch) const = 0;
  // Training FLOPs per unit in closed form; 0: learnt from the flops profile when enabled.
  virtual double train_flops_per_unit(const models::ModelOptions& model) const = 0;
  // The model's shape on the start-up line ("" when nothing beyond its type is worth saying).
  virtual std::string describe_model(const models::ModelOptions& model) const = 0;
  virtual std::string describe_eval(const EvalResult& result) const = 0;
  // The input has a sequence axis a seqlen curriculum may shorten; the run ends with a text sample.
  virtual bool sequences() const = 0;
};

// The task of `name` (models::ModelEntry::task); UsageError naming the model type for another.
const Task& find_task(const std::string& name, const std::string& model_type);

}  // namespace xtrain
