// The training loop `xtrain train` runs: builds data, task, model, loss and Engine from the config
// (setup.h), trains for xtrain.steps with a progress line, validates and checkpoints at intervals,
// resumes exactly from a run directory, and ends with a summary (and a text sample for language
// models). A run directory holds config.json (resolved), metrics.jsonl and checkpoints/.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/config/config.h"
#include "xtrain/data/dataset.h"
#include "xtrain/run/evaluate.h"  // EvalResult, evaluate
#include "xtrain/models/factory.h"

namespace xtrain::data {
class Tokenizer;
}

namespace xtrain {

struct TrainRequest {
  std::string config_path;             // "" = built-in defaults (configs/default.json)
  std::vector<std::string> overrides;  // --set
  std::string output;                  // run directory; "" = <xtrain.output>/<name>
  bool resume = false;
  bool find_lr = false;
};

struct TrainResult {
  std::string run_dir;
  int64_t steps = 0;
  double final_train_loss = 0.0;
  EvalResult final_eval;
  double tokens_per_second = 0.0;  // or samples/s for image models
  std::string sample;              // generated text (language models)
};

// The built-in default config (configs/default.json, compiled in).
const std::string& default_config_text();
// What the built-in default needs on this machine before `overrides` (bf16.enabled=false on a CPU
// without native bf16, unless `overrides` set bf16); *note says why, when there is anything.
std::vector<std::string> default_config_overrides(const std::vector<std::string>& overrides, std::string* note);

// Loads a config for a run: an explicit file, else the run directory's config.json on resume,
// else the built-in default. Applies overrides; world size from the environment.
config::Loaded load_run_config(const TrainRequest& request, const std::string& run_dir);

TrainResult train(const TrainRequest& request);
// `--find-lr`: an exponential learning-rate sweep (1e-6 → 1 over up to 200 steps, stopping when
// the loss explodes) on a fresh model; prints the loss curve and a suggested lr
// (sched/lr_finder.h). Returns the suggestion.
double find_lr(const TrainRequest& request);

// A trained model from a run directory: its config.json and the weights of its latest checkpoint
// (or `tag`). For eval, generate, compress and export.
struct TrainedRun {
  config::Config config;
  models::Model model;
  std::string checkpoint_dir;
};
TrainedRun load_trained_run(const std::string& run_dir, const std::string& tag = "");
// Text from a GPT: `prompt` encoded by `tokenizer`, `tokens` ids sampled after it (top_k 0 = all,
// temperature > 0), decoded by `tokenizer` (the run's: run_tokenizer.h).
std::string generate_text(const models::Model& model, const data::Tokenizer& tokenizer, const std::string& prompt,
                          int64_t tokens, double temperature, int64_t top_k, uint64_t seed);
// The same with the byte tokenizer: the bytes generated after `prompt`.
std::string generate_text(const models::Model& model, const std::string& prompt, int64_t tokens, double temperature,
                          int64_t top_k, uint64_t seed);
// The end-of-run sample from xtrain.generate.
std::string sample_text(const models::Model& model, const config::Config& config);

}  // namespace xtrain
