// The model registry: `xtrain.model.type` names an entry (a description, the task it trains on, a
// factory, the xtrain.model keys it reads). gpt, resnet18 and mlp are built-ins; a user's code or a
// plugin library (`xtrain train --plugin lib.so`) adds its own with one register_model call. Design
// choice: ModelOptions stays one plain struct; a model outside the repository reads its own settings
// from `xtrain.model.args`, a JSON object the config layer passes through unread and the entry's
// validate() checks. What a model can do beyond training whole on one rank (sample text, be traced
// for export, split over tensor- or pipeline-parallel ranks, checkpoint activations) is an optional
// hook on its entry: callers ask the entry, never the type name; a null hook is a UsageError naming
// the model type and the key that asked for it. Public API: this header includes nothing internal
// beyond the model types.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/models/factory.h"

namespace xtrain::comm {
class Communicator;
}
namespace xtrain::nn {
struct ActivationCheckpointingOptions;
}

namespace xtrain::models {

class IncrementalDecoder;  // kv_cache.h
struct DecoderWeights;

// One `xtrain.model.<key>` an entry reads, for docs/config.md ("layers", "args.width").
struct ModelKey {
  std::string key;
  std::string doc;
};

// generate's settings (xtrain.generate, `xtrain generate`).
struct Sampling {
  int64_t tokens = 0;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: no top-k; 1: greedy
  uint64_t seed = 0;
};

// XTRAIN_SMOKE's bounds for a tiny model: heads a multiple of tp, at least one layer per stage.
struct TinyLimits {
  int64_t tp = 1, stages = 1, seq_len = 64, head_size = 16;
};

struct TensorParallelModel {
  Model model;  // this rank's shard; forward returns the whole (gathered) output
  // The training loss on this rank's split output (for an LM: the vocabulary-parallel cross-entropy).
  std::function<at::Tensor(const at::Tensor& input, const at::Tensor& target)> train_loss;
};

// pipeline.* as a stage cut needs it.
struct PipelineCut {
  int stage = 0, stages = 1;
  std::string partition;        // pipeline.partition ("best" already mapped)
  int64_t checkpoint_interval = 0;  // pipeline.activation_checkpoint_interval
  std::shared_ptr<comm::Communicator> pp, tp;
  const nn::ActivationCheckpointingOptions* checkpointing = nullptr;
};

// What the engine needs of this rank's stage; the hook has already replaced model.module (the
// stage) and model.forward (the whole pipeline's forward, every rank in step).
struct PipelineStageModel {
  std::function<at::Tensor(const at::Tensor&)> forward;  // the stage alone: its input -> its output
  // The last stage's loss under tensor parallelism (on the split output); null without it.
  std::function<at::Tensor(const at::Tensor& out, const at::Tensor& target)> tensor_parallel_loss;
  std::vector<std::string> tied;  // parameters another stage also holds (summed over the embedding group)
};

struct ModelEntry {
  std::string description;
  std::string task;  // "lm" (int64 [B, T] -> [B, T, V]) | "classify" ([B, ...] -> [B, classes])
  // Builds the model; deterministic given torch::manual_seed. The returned Model's task and options
  // may be left empty: build_model fills them from the entry and the options.
  std::function<Model(const ModelOptions&)> build;
  std::vector<ModelKey> keys;
  // Optional: checks the options before any work (`xtrain config`, `xtrain train`'s start-up
  // checks); throws UsageError naming the key. Sizes filled from the dataset (num_classes,
  // in_features) may still be 0 here.
  std::function<void(const ModelOptions&)> validate;

  // Optional capabilities (the types below). Null: the model does not have it.
  std::function<std::vector<int64_t>(const ModelOptions&)> sample_shape;  // one input sample, no batch dim
  std::function<std::vector<int64_t>(const Model&, const std::vector<int64_t>& prompt, const Sampling&)> generate;
  std::function<std::vector<std::pair<std::string, int64_t>>(const ModelOptions&, const TinyLimits&)> tiny;
  std::function<TensorParallelModel(const ModelOptions&, std::shared_ptr<comm::Communicator> tp)> tensor_parallel;
  std::function<PipelineStageModel(Model& model, const PipelineCut& cut)> pipeline_stage;
  std::function<void(torch::nn::Module& module, const nn::ActivationCheckpointingOptions&)> checkpoint_activations;
  // Incremental decoding with a KV cache (xtrain serve); `weights` replaces layers (int8).
  std::function<std::shared_ptr<IncrementalDecoder>(const Model&, const DecoderWeights& weights)> incremental_decoder;
};

// Adds `name`, replacing an entry of that name. UsageError for an empty name, a missing factory or
// a task other than "lm" / "classify".
void register_model(const std::string& name, ModelEntry entry);
// The entry, or a UsageError naming xtrain.model.type, the closest registered name and the list.
const ModelEntry& find_model(const std::string& name);
// Every registered name, built-ins first, then in the order registered.
std::vector<std::string> model_names();

// The registry's checks of `xtrain.model`: a registered type, and the entry's validate().
void check_model_options(const ModelOptions& options);

// The entry of `type` when its `hook` is set, else a UsageError naming the setting that asked:
// "config: <key> needs a model that <what>; xtrain.model.type "x" has none (ModelEntry::<hook_name>
// is not set)". The check_* functions run these at start-up (`xtrain config`, `xtrain train`).
[[noreturn]] void missing_capability(const std::string& type, const std::string& key, const std::string& what,
                                     const std::string& hook_name);
template <class Hook>
const ModelEntry& require_hook(const std::string& type, Hook ModelEntry::*hook, const std::string& hook_name,
                               const std::string& key, const std::string& what) {
  const ModelEntry& e = find_model(type);
  if (!(e.*hook)) missing_capability(type, key, what, hook_name);
  return e;
}
const ModelEntry& check_tensor_parallel_model(const std::string& type);       // tensor_parallel
const ModelEntry& check_pipeline_model(const std::string& type);              // pipeline_stage
const ModelEntry& check_activation_checkpointing_model(const std::string& type);  // checkpoint_activations
// One input sample's shape (no batch dimension) for tracing and `xtrain export`, from the entry's
// sample_shape; UsageError naming the model type when it has none.
std::vector<int64_t> input_sample_shape(const ModelOptions& options);

// docs/config.md's "Registered models" section: each model, its task and the keys it reads.
std::string models_markdown();

}  // namespace xtrain::models
