#include "xtrain/run/run_checks.h"

#include <c10/util/StringUtil.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/data/curriculum.h"
#include "xtrain/data/difficulty_sampler.h"
#include "xtrain/data/registry.h"
#include "xtrain/engine/engine.h"
#include "xtrain/models/gpt_pipeline_model.h"
#include "xtrain/models/gpt_tensor_parallel_model.h"
#include "xtrain/models/registry.h"
#include "xtrain/monitor/run_monitor.h"
#include "xtrain/nn/losses.h"
#include "xtrain/precision/policy.h"
#include "xtrain/sched/schedule.h"
#include "xtrain/zero/offload/disk_backed_allocations.h"
#include "xtrain/zero/strategy.h"

namespace xtrain {
namespace {

// The task of a registered model / dataset ("lm" | "classify"), "" for a name the registry does not
// hold (check_registered reports that one).
std::string model_task(const std::string& type) {
  const auto names = models::model_names();
  return std::find(names.begin(), names.end(), type) == names.end() ? "" : models::find_model(type).task;
}
std::string data_task(const std::string& type) {
  const auto names = data::dataset_names();
  return std::find(names.begin(), names.end(), type) == names.end() ? "" : data::find_dataset(type).task;
}

// The names whose task is "lm", joined: `"gpt"` / `text`.
std::string lm_models() {
  std::vector<std::string> out;
  for (const auto& n : models::model_names()) {
    if (models::find_model(n).task == "lm") out.push_back("\"" + n + "\"");
  }
  return c10::Join(" or ", out);
}
std::string lm_datasets() {
  std::vector<std::string> out;
  for (const auto& n : data::dataset_names()) {
    if (data::find_dataset(n).task == "lm") out.push_back(n);
  }
  return c10::Join(" or ", out);
}

// Model and data agreement (what building the run would find out late): the model's task is the
// one the dataset's batches feed.
void check_model_data(const config::Config& c) {
  const auto& mo = c.model;
  const std::string mt = model_task(mo.type);
  if (data_task(c.data.type) == "lm") {
    XTRAIN_USAGE_CHECK(mt == "lm", "config: xtrain.model.type \"", mo.type, "\" cannot train on text data;",
                       " use ", lm_models(), " (or an image dataset)");
  } else {
    XTRAIN_USAGE_CHECK(mt != "lm", "config: xtrain.model.type \"", mo.type, "\" needs text data (xtrain.data.type=",
                       lm_datasets(), ")");
  }
  if (c.activation_checkpointing.enabled) models::check_activation_checkpointing_model(mo.type);
}

void check_parallel(const config::Config& c) {
  if (c.tensor_parallel.size > 1) {
    models::check_tensor_parallel_model(c.model.type);
    XTRAIN_USAGE_CHECK(c.loss.type == "cross_entropy" && c.loss.label_smoothing == 0.0,
                       "config: tensor_parallel.size > 1 trains with plain cross-entropy (the vocabulary-parallel loss);"
                       " remove xtrain.loss.type / xtrain.loss.label_smoothing");
    XTRAIN_USAGE_CHECK(c.zero_optimization.stage <= 2, "config: tensor_parallel.size > 1 works with ZeRO stages 0-2, got "
                       "zero_optimization.stage ", c.zero_optimization.stage);
  }
  if (c.pipeline.stages > 1) models::check_pipeline_model(c.model.type);
}

void check_data_order(const config::Config& c) {
  if (c.curriculum_learning.enabled) {
    XTRAIN_USAGE_CHECK(data_task(c.data.type) == "lm",
                       "config: curriculum_learning (seqlen) needs text data (xtrain.data.type=text)");
    XTRAIN_USAGE_CHECK(c.curriculum_learning.max_difficulty <= c.model.seq_len,
                       "config: curriculum_learning.max_difficulty (", c.curriculum_learning.max_difficulty,
                       ") must be <= xtrain.model.seq_len (", c.model.seq_len, ")");
    data::CurriculumScheduler check(c.curriculum_learning);
  }
  if (c.data.ordering.enabled) data::validate_ordering(c.data.ordering);
}

// The options the engine and the monitor build, checked by the areas that own them.
void check_precision(const config::Config& c) {
  precision::check_cpu_supported(
      precision::make_policy(c.fp16, c.bf16, c.amp, /*cuda=*/false, c.engine.grad_accum_dtype));
}

void check_zero(const config::Config& c) {
  zero::StrategyOptions so;
  so.zero = c.zero_optimization;
  so.aio = c.aio;
  so.optimizer = c.optimizer;
  so.allow_untested_optimizer = c.engine.zero_allow_untested_optimizer;
  zero::check_supported(so);
  const auto& z = c.zero_optimization;
  if (z.offload_optimizer.device == "nvme") {
    zero::check_nvme_folder(z.offload_optimizer.nvme_path, "zero_optimization.offload_optimizer.nvme_path");
  }
  if (z.stage == 3 && z.offload_param.device == "nvme") {
    zero::check_nvme_folder(z.offload_param.nvme_path, "zero_optimization.offload_param.nvme_path");
  }
}

void check_loss_and_schedule(const config::Config& c) {
  nn::make_loss(c.loss);
  sched::make_schedule(c.scheduler, c.optimizer.lr());
}

// xtrain.model.type and xtrain.data.type name registered entries, whose own checks pass.
void check_registered(const config::Config& c) {
  models::check_model_options(c.model);
  data::check_data_options(c.data);
}

void check_monitor(const config::Config& c) {
  monitor::RunMonitorOptions mo;
  mo.tensorboard = c.tensorboard;
  mo.csv_monitor = c.csv_monitor;
  mo.flops_profiler = c.flops_profiler;
  mo.monitor = c.monitor;
  monitor::check_options(mo);
}

}  // namespace

void check_run_config(const config::Config& c) {
  std::vector<std::string> errors;
  using Check = std::function<void(const config::Config&)>;
  for (const Check& check : {Check(check_model_data), Check(check_parallel), Check(check_data_order),
                             Check(check_precision), Check(check_closure_optimizer), Check(check_local_sgd), Check(check_zero),
                             Check(check_loss_and_schedule),
                             Check(check_monitor), Check(check_registered)}) {
    try {
      check(c);
    } catch (const UsageError& e) {
      errors.emplace_back(e.what());
    }
  }
  if (errors.empty()) return;
  if (errors.size() == 1) throw UsageError(errors.front());
  std::string m = c10::str("config: ", errors.size(), " errors:");
  for (const auto& e : errors) m += "\n  " + e;
  throw UsageError(m);
}

}  // namespace xtrain
