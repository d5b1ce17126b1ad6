#include "xtrain/config/rules.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/config/key_status.h"

namespace xtrain::config {
namespace {

// DeepSpeed 0.16 (reference/deepspeed.md) reads `bf16` key by key: other keys are ignored.
const std::vector<std::string> kBf16Keys = {"enabled", "immediate_grad_update"};
// Naming any of these in `fp16` makes DeepSpeed 0.16 build its dynamic-scaler arguments from the
// block (config.py get_dynamic_loss_scale_args); naming none leaves the scaler's own defaults.
const std::vector<std::string> kScalerKeys = {"initial_scale_power", "loss_scale_window", "min_loss_scale",
                                              "hysteresis", "consecutive_hysteresis"};

const std::vector<RecognisedKey> kRecognised = {
    {"sparse_attention", "present", "xtrain's sparse attention is xtrain.model.attention.type \"multiscale\""},
    {"elasticity", "enabled", "xtrain does not implement DeepSpeed's elastic batch sizing; `xtrain launch` restarts failed ranks"},
    {"autotuning", "enabled", "xtrain does not implement DeepSpeed's autotuner; `xtrain tune` searches hyper-parameters"},
    {"compression_training", "", "DeepSpeed applies it only when the training script calls init_compression; xtrain's compression is `xtrain compress`"},
    {"eigenvalue", "enabled", "xtrain does not implement eigenvalue-based quantisation schedules"},
    {"progressive_layer_drop", "enabled", "xtrain does not implement progressive layer dropping"},
    {"hybrid_engine", "enabled", "the hybrid engine is DeepSpeed-Chat's inference engine; `xtrain serve` serves models"},
    {"nebula", "enabled", "Nebula is Azure's checkpoint service; xtrain writes checkpoints itself"},
    {"weight_quantization", "", "DeepSpeed uses it for inference only; xtrain's quantisation is `xtrain compress`"},
    {"data_efficiency", "enabled", "xtrain's data curriculum is curriculum_learning and xtrain.data.ordering"},
    {"timers", "", "xtrain's progress line reports throughput itself"},
    {"graph_harvesting", "", "it captures CUDA graphs of DeepSpeed's optimizer kernels, which xtrain does not have"},
    {"moe", "enabled", "xtrain has no mixture-of-experts layers"},
    {"quantize_training", "enabled", "xtrain does not implement MoQ quantised training; see `xtrain compress`"},
    {"dataloader", "", "xtrain builds its own data loader from xtrain.data"},
    {"sequence_parallel_size", "!=1", "xtrain has no sequence (Ulysses) parallelism; sequence_parallel_size 1 is none"},
    {"seq_parallel_comm_data_type", "", "it only applies to sequence parallelism, which xtrain does not have"},
    {"use_data_before_expert_parallelism", "", "it only orders mixture-of-experts groups, which xtrain does not have"},
    {"vocabulary_size", "", "DeepSpeed only warns when it is not a multiple of 8; xtrain's vocabulary is xtrain.model.vocab"},
    {"disable_allgather", "", "DeepSpeed reads it and no longer uses it"},
};

bool enabled_in(const Json& j) {
  if (j.is_boolean()) return j.get<bool>();
  return j.is_object() && j.contains("enabled") && j["enabled"].is_boolean() && j["enabled"].get<bool>();
}

void recognised_only(Json& root, Findings& f) {
  for (const auto& r : kRecognised) {
    auto it = root.find(r.key);
    if (it == root.end()) continue;
    const std::string when = r.refuse_when;
    const bool refuse = (when == "present") || (when == "enabled" && enabled_in(*it)) ||
                        (when == "!=1" && !(it->is_number() && it->get<double>() == 1));
    if (refuse) {
      f.errors.push_back(std::string("config: not supported yet: ") + r.key + (when == "enabled" ? ".enabled" : "") +
                         " (" + r.reason + ")");
    } else {
      f.warnings.push_back(std::string("config: ") + r.key + " has no effect here: " + r.reason);
    }
    root.erase(it);
  }
}

// Extra keys in bf16: people copy loss_scale, hysteresis, ... from their fp16 block; DeepSpeed
// ignores them. A near miss of a real key stays for the visit (an error naming the right key).
void bf16_extras(Json& root, Findings& f) {
  for (const char* section : {"bf16", "bfloat16"}) {
    auto it = root.find(section);
    if (it == root.end() || !it->is_object()) continue;
    std::vector<std::string> extras;
    for (auto k = it->begin(); k != it->end(); ++k) {
      const bool known = std::find(kBf16Keys.begin(), kBf16Keys.end(), k.key()) != kBf16Keys.end();
      if (!known && !closest_match(k.key(), kBf16Keys)) extras.push_back(k.key());
    }
    if (extras.empty()) continue;
    std::string names;
    for (const auto& e : extras) {
      names += (names.empty() ? "" : ", ") + std::string(section) + "." + e;
      it->erase(e);
    }
    f.warnings.push_back("config: ignoring " + names + ", as DeepSpeed does (bf16 reads only enabled and "
                         "immediate_grad_update; loss scaling belongs to fp16)");
  }
}

// DeepSpeed lower-cases the communication dtype ("FP16" is fp16); "bfp16" stays an error.
void lower_case_dtypes(Json& root) {
  auto it = root.find("communication_data_type");
  if (it == root.end() || !it->is_string()) return;
  std::string v = it->get<std::string>();
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  *it = v;
}

}  // namespace

const std::vector<RecognisedKey>& recognised_keys() { return kRecognised; }

const std::vector<std::string>& null_default_keys() {
  // DeepSpeed 0.16 defaults: activation_checkpointing.number_checkpoints None, steps_per_print None.
  // torch.optim.LBFGS: line_search_fn None.
  static const std::vector<std::string> keys = {"activation_checkpointing.number_checkpoints", "steps_per_print",
                                                "optimizer.params.line_search_fn"};
  return keys;
}

FileFacts before_visit(Json& root, Findings& f) {
  // Legacy "zero_optimization": true means stage 1.
  if (root.contains("zero_optimization") && root["zero_optimization"].is_boolean()) {
    const bool on = root["zero_optimization"].get<bool>();
    root["zero_optimization"] = Json{{"stage", on ? 1 : 0}};
    f.warnings.push_back("config: \"zero_optimization\": true/false is deprecated; use {\"stage\": N}");
  }
  recognised_only(root, f);
  bf16_extras(root, f);
  lower_case_dtypes(root);
  FileFacts facts;
  auto fp16 = root.find("fp16");
  if (fp16 != root.end() && fp16->is_object()) {
    for (const auto& k : kScalerKeys) facts.fp16_names_scaler_keys |= fp16->contains(k);
  }
  return facts;
}

namespace {

// DeepSpeed 0.16 with fp16 and a block that names no scaler key: ZeRO's DynamicLossScaler() starts
// at 2^32 with hysteresis 1 (fp16/loss_scaler.py); stage 0's FP16_Optimizer at 2^initial_scale_power
// (16) with no hysteresis. DeepSpeed >= 0.17.1 always uses the documented defaults.
void fp16_scaler_defaults(Config& c, const FileFacts& facts, Findings& f) {
  auto& p = c.fp16;
  if (!p.enabled || p.loss_scale != 0 || facts.fp16_names_scaler_keys) return;
  if (c.zero_optimization.stage >= 1) p.initial_scale_power = 32;
  p.hysteresis = 1;
  f.notes.push_back(c10::str("fp16: the block names no loss-scaler key, so DeepSpeed's ", 
                             c.zero_optimization.stage >= 1 ? "ZeRO" : "stage-0", " scaler defaults apply: initial scale 2^",
                             p.initial_scale_power, ", hysteresis 1"));
}

}  // namespace

void after_visit(Config& c, const FileFacts& facts, Findings& f) {
  auto& z = c.zero_optimization;
  if (z.stage < 3 && z.offload_param.device != "none") {  // DeepSpeed reads offload_param at stage 3 only
    f.warnings.push_back(c10::str("config: zero_optimization.offload_param has no effect below stage 3 (stage ", z.stage,
                                  "), as in DeepSpeed"));
    z.offload_param.device = "none";
  }
  if (z.reduce_bucket_size == 0) {
    if (z.stage == 0) {  // DeepSpeed's stage-0 all-reduce uses fixed 5e8-element buckets
      f.warnings.push_back("config: zero_optimization.reduce_bucket_size 0 has no effect at stage 0 (DeepSpeed "
                           "reduces stage-0 gradients in 500000000-element buckets): using 500000000");
      z.reduce_bucket_size = 500000000;
    } else {
      f.errors.push_back(c10::str("config: zero_optimization.reduce_bucket_size must be > 0 with ZeRO stage ", z.stage,
                                  " (DeepSpeed divides by it: ZeroDivisionError at the first backward)"));
    }
  }
  auto& fp = c.flops_profiler;
  if (fp.enabled && fp.profile_step < 0) {  // DeepSpeed profiles when global_steps == profile_step: never
    f.warnings.push_back(c10::str("config: flops_profiler.profile_step ", fp.profile_step,
                                  " is never reached, so nothing is profiled (as in DeepSpeed); the step timers stay on"));
    fp.enabled = false;
    c.engine.wall_clock_breakdown = true;  // DeepSpeed: an enabled profiler turns wall_clock_breakdown on
  }
  fp16_scaler_defaults(c, facts, f);
}

void apply_key_statuses(const std::vector<std::pair<std::string, Json>>& present, const std::vector<KeyRow>& rows,
                        Findings& f) {
  std::unordered_map<std::string, const KeyRow*> by_file_key;
  for (const auto& r : rows) by_file_key.emplace(file_key(r.key), &r);
  // DeepSpeed reads the fp16 block's other keys only when fp16 is enabled (a file switched to bf16
  // keeps them): there a refused fp16 key changes nothing, and it is said so.
  bool fp16_enabled = false;
  for (const auto& [path, value] : present) {
    if (path == "fp16.enabled" && value.is_boolean()) fp16_enabled = value.get<bool>();
  }
  for (const auto& [path, value] : present) {
    const KeyStatus* s = find_key_status(path);
    auto row = by_file_key.find(path);
    if (!s || s->state == KeyState::honoured || row == by_file_key.end()) continue;
    if (value == row->second->default_value) continue;  // the default changes nothing either way
    if (!fp16_enabled && path.rfind("fp16.", 0) == 0 && s->state == KeyState::refused) {
      f.warnings.push_back("config: " + path + " has no effect: fp16.enabled is false");
      continue;
    }
    if (s->state == KeyState::refused) {
      f.errors.push_back("config: " + refused_message(*s));
    } else {
      f.warnings.push_back(no_effect_line(*s));
    }
  }
}

}  // namespace xtrain::config
