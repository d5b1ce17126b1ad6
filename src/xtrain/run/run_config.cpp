// Which config a run uses (explicit file > the run's own config.json on resume > the built-in
// default), and text generation for the end-of-run sample and `xtrain generate`.
#include <ATen/Functions.h>

#include <algorithm>
#include <filesystem>

#include "xtrain/base/cpu_isa.h"
#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/rank_info.h"
#include "xtrain/data/dataset.h"
#include "xtrain/run/run_dir.h"
#include "xtrain/run/run_tokenizer.h"
#include "xtrain/run/smoke.h"
#include "xtrain/run/train.h"
#include "xtrain/models/registry.h"
#include "xtrain/run/checkpoint_merge.h"

namespace xtrain {
namespace fs = std::filesystem;

namespace {

config::Loaded load_default_config(config::LoadOptions options) {
  std::string note;
  const auto adjust = default_config_overrides(options.overrides, &note);
  options.overrides.insert(options.overrides.begin(), adjust.begin(), adjust.end());
  auto loaded = config::load_text(default_config_text(), options, "configs/default.json");
  if (!note.empty()) loaded.notes.push_back(note);
  return loaded;
}

config::Loaded load_run_config_as_given(const TrainRequest& request, const std::string& run_dir) {
  config::LoadOptions options;
  options.overrides = request.overrides;
  options.world_size = comm::rank_info_from_env().world_size;  // torchrun, Slurm or Open MPI
  if (!request.config_path.empty()) return config::load(request.config_path, options);
  const std::string saved = run_dir.empty() ? "" : (fs::path(run_dir) / "config.json").string();
  if (request.resume && !saved.empty() && fs::exists(saved)) {
    // The saved config is resolved for the world size it ran at: keep its global and micro batch
    // and re-derive the accumulation steps, so a resume on a different number of ranks works.
    options.overrides.insert(options.overrides.begin(), "gradient_accumulation_steps=auto");
    return config::load(saved, options);
  }
  return load_default_config(std::move(options));
}

}  // namespace

// The built-in default trains in bf16 (configs/default.json) because on a CPU that multiplies bf16
// natively (AVX512-BF16, AMX) oneDNN runs it at ~2x fp32's rate; elsewhere bf16 is emulated and
// slower than fp32, so there the default falls back to fp32 and says so. A user's bf16 setting wins.
std::vector<std::string> default_config_overrides(const std::vector<std::string>& overrides, std::string* note) {
  const bool user_set = std::any_of(overrides.begin(), overrides.end(), [](const std::string& o) {
    return o.rfind("bf16", 0) == 0 || o.rfind("bfloat16", 0) == 0;
  });
  if (user_set || base::cpu_has_native_bf16()) return {};
  if (note) {
    *note = "default recipe: fp32, not bf16: this CPU has no native bf16 (AVX512-BF16 or AMX); "
            "--set bf16.enabled=true forces bf16";
  }
  return {"bf16.enabled=false"};
}

config::Loaded load_run_config(const TrainRequest& request, const std::string& run_dir) {
  auto loaded = load_run_config_as_given(request, run_dir);
  if (!smoke::enabled()) return loaded;
  // XTRAIN_SMOKE: the same config shrunk (smoke.h), loaded again so every check sees the result.
  const bool resumed = request.resume && request.config_path.empty() && !run_dir.empty() &&
                       fs::exists(fs::path(run_dir) / "config.json");
  const auto shrink = smoke::train_overrides(loaded.config, request.overrides, resumed, request.find_lr);
  TrainRequest tiny = request;
  tiny.overrides.insert(tiny.overrides.end(), shrink.begin(), shrink.end());
  loaded = load_run_config_as_given(tiny, run_dir);
  loaded.notes.push_back("XTRAIN_SMOKE: tiny settings: --set " + c10::Join(" --set ", shrink));
  return loaded;
}

std::string generate_text(const models::Model& model, const std::string& prompt, int64_t tokens, double temperature,
                          int64_t top_k, uint64_t seed) {
  return generate_text(model, *data::make_tokenizer(data::TokenizerSpec{}), prompt, tokens, temperature, top_k, seed);
}

std::string generate_text(const models::Model& model, const data::Tokenizer& tokenizer, const std::string& prompt,
                          int64_t tokens, double temperature, int64_t top_k, uint64_t seed) {
  const auto& entry = models::find_model(model.options.type);
  XTRAIN_USAGE_CHECK(entry.generate, "generate: xtrain.model.type \"", model.options.type,
                     "\" does not generate text (its ModelEntry::generate is not set)");
  std::vector<int64_t> ids;
  for (int32_t id : tokenizer.encode(prompt)) ids.push_back(id);
  if (ids.empty()) {  // something to condition on: the end-of-text id, else a newline
    const auto eot = tokenizer.end_of_text();
    const std::vector<int32_t> start = eot ? std::vector<int32_t>{*eot} : tokenizer.encode("\n");
    ids.assign(start.begin(), start.end());
  }
  const std::vector<int64_t> out = entry.generate(model, ids, {tokens, temperature, top_k, seed});
  return tokenizer.decode(std::vector<int32_t>(out.begin(), out.end()));
}

std::string sample_text(const models::Model& model, const config::Config& c) {
  const auto& g = c.trainer.generate;
  auto tokenizer = data_tokenizer(c.data);
  if (!tokenizer && model.options.vocab != 256) return "";  // token data without a tokenizer: nothing to decode
  if (!tokenizer) tokenizer = data::make_tokenizer(data::TokenizerSpec{});
  return generate_text(model, *tokenizer, g.prompt, g.tokens, g.temperature, g.top_k,
                       static_cast<uint64_t>(c.trainer.seed));
}

TrainedRun load_trained_run(const std::string& run_dir, const std::string& tag) {
  const std::string config_path = (fs::path(run_dir) / "config.json").string();
  XTRAIN_USAGE_CHECK(fs::exists(config_path), "no run at ", run_dir, " (", config_path,
                     " is missing; runs live under runs/ by default)");
  TrainedRun run;
  config::LoadOptions options;  // one process: the batch size of a data-parallel run is re-derived
  // Model-parallel runs are merged into the one-rank model.
  options.overrides = {"train_batch_size=auto", "tensor_parallel.size=1", "pipeline.stages=1"};
  options.quiet = true;
  run.config = config::load(config_path, options).config;
  torch::manual_seed(run.config.trainer.seed);
  run.model = models::build_model(run.config.model);
  checkpoint::CheckpointReader reader((fs::path(run_dir) / "checkpoints").string(), tag);
  run.checkpoint_dir = reader.dir();
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> weights;
  // Stage 0 writes model.pt; ZeRO stages write shards, consolidated here (fp32), and tensor- or
  // pipeline-parallel ranks their parts, merged here.
  for (auto& [name, t] : merge_checkpoint(reader, /*with_optimizer=*/false).model) weights[name] = t;
  auto restore = [&](const std::string& name, at::Tensor target) {
    auto it = weights.find(name);
    XTRAIN_USAGE_CHECK(it != weights.end(), "checkpoint ", reader.dir(), " has no tensor for ", name);
    const at::Tensor& saved = it->second;
    // A consolidated ZeRO shard may come back flat; any other shape must be the model's own.
    const bool flat_of_same = saved.dim() == 1 && saved.numel() == target.numel();
    XTRAIN_USAGE_CHECK(saved.sizes() == target.sizes() || flat_of_same, "checkpoint ", reader.dir(), " holds ", name,
                       " ", saved.sizes(), ", and the model built from ", config_path, " needs ", target.sizes(),
                       ": the run's config.json does not describe the model that was saved");
    target.copy_(saved.reshape(target.sizes()));
  };
  const auto rank0 = checkpoint::model_parallel_rank0(reader);
  if (rank0.has_file("buffers.pt")) {
    for (auto& [name, t] : rank0.read_tensors("buffers.pt")) weights[name] = t;
  }
  for (auto& item : run.model.module->named_parameters(true)) restore(item.key(), item.value());
  for (auto& item : run.model.module->named_buffers(true)) restore(item.key(), item.value());
  run.model.module->eval();
  return run;
}

}  // namespace xtrain
