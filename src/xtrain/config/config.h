// The whole ds_config.json as typed options: DeepSpeed's sections with DeepSpeed's names and
// defaults, and xtrain's own keys under "xtrain" (and a few top-level keys DeepSpeed lacks:
// documented in docs/config.md). `load` parses, applies --set overrides, resolves "auto" and the
// batch triple, and rejects typos with a suggestion.
#pragma once
#include <string>
#include <vector>

#include "xtrain/checkpoint/options.h"
#include "xtrain/comm/options.h"
#include "xtrain/config/python_options.h"
#include "xtrain/data/options.h"
#include "xtrain/engine/options.h"
#include "xtrain/models/options.h"
#include "xtrain/monitor/options.h"
#include "xtrain/nn/options.h"
#include "xtrain/optim/options.h"
#include "xtrain/parallel/options.h"
#include "xtrain/precision/options.h"
#include "xtrain/sched/options.h"
#include "xtrain/zero/options.h"

namespace xtrain::config {

struct Config {
  engine::EngineOptions engine;  // top-level keys
  bool has_optimizer = false;
  optim::OptimizerOptions optimizer;
  sched::SchedulerOptions scheduler;
  precision::Fp16Options fp16;
  precision::Bf16Options bf16;
  precision::AmpOptions amp;
  precision::Tf32Options tf32;
  zero::ZeroOptions zero_optimization;
  zero::AioOptions aio;
  nn::ActivationCheckpointingOptions activation_checkpointing;
  monitor::SinkOptions tensorboard;
  monitor::SinkOptions csv_monitor;
  monitor::WandbOptions wandb;
  monitor::CometOptions comet;
  monitor::FlopsProfilerOptions flops_profiler;
  monitor::CommsLoggerOptions comms_logger;
  data::CurriculumOptions curriculum_learning;
  parallel::PipelineOptions pipeline;
  parallel::TensorParallelOptions tensor_parallel;
  checkpoint::CheckpointOptions checkpoint;
  // "xtrain": {...}
  models::ModelOptions model;
  data::DataOptions data;
  nn::LossOptions loss;
  engine::TrainerOptions trainer;
  comm::CommOptions comm;
  monitor::MonitorOptions monitor;
  parallel::LocalSgdOptions local_sgd;
  PythonOptions python;  // read by python/xtrain only

  // Filled by `load`: the data-parallel size the batch triple was resolved for.
  int64_t dp_world_size = 1;

  template <class V>
  void visit(V& v);
};

struct LoadOptions {
  std::vector<std::string> overrides;  // "dotted.key=value" (value parsed as JSON, else a string)
  int64_t world_size = 1;              // all ranks; the data-parallel size is world / (tp * pp)
  bool quiet = false;                  // no "auto resolved" / warning lines
};

struct Loaded {
  Config config;
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // "auto" resolutions and derived values, for printing
};

// Reads a file (comments allowed; duplicate keys rejected; an empty file is invalid JSON, as in
// DeepSpeed). path "" = all defaults. Every error in the file is reported in one UsageError.
Loaded load(const std::string& path, const LoadOptions& options);
// The same from JSON text (tests, tune).
Loaded load_text(const std::string& text, const LoadOptions& options, const std::string& origin = "<string>");

// The resolved config, every key with its value, as DeepSpeed-format JSON.
std::string to_json(const Config& config, int indent = 2);
// docs/config.md, generated from the visit() lists, with each key's status (key_status.h), then
// the sections added below.
std::string markdown_reference();
// Appends a section to markdown_reference(), sections sorted by `order`: the model and dataset
// registries list their built-in entries (config/ may not include the areas that own them). Called
// from those areas' static initialisers; returns true so it can initialise a constant.
bool add_reference_section(int order, std::string (*section)());

}  // namespace xtrain::config
