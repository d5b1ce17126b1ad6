#include "xtrain/config/config.h"

#include <fstream>
#include <sstream>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/config/batch.h"
#include "xtrain/config/config_visit.h"
#include "xtrain/config/visitors.h"

namespace xtrain::config {
namespace {

// DeepSpeed sections xtrain recognises but does not implement: present is fine, enabled is an error.
const std::vector<std::string> kRecognisedOnly = {
    "sparse_attention", "elasticity",   "autotuning",   "compression_training", "eigenvalue",
    "progressive_layer_drop", "hybrid_engine", "nebula", "weight_quantization", "data_efficiency",
    "timers", "graph_harvesting", "moe", "quantize_training", "dataloader", "sequence_parallel_size",
    "seq_parallel_comm_data_type", "use_data_before_expert_parallelism", "vocabulary_size",
    "disable_allgather", "zero_force_ds_cpu_optimizer"};

std::pair<int, int> line_and_column(const std::string& text, size_t byte) {
  int line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

Json parse_json(const std::string& text, const std::string& origin) {
  // Duplicate keys are an error (DeepSpeed rejects them); nlohmann would keep the last silently.
  std::vector<std::vector<std::string>> keys_per_level;
  std::string duplicate;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) keys_per_level.emplace_back();
    if (event == Json::parse_event_t::object_end && !keys_per_level.empty()) keys_per_level.pop_back();
    if (event == Json::parse_event_t::key && !keys_per_level.empty()) {
      auto& seen = keys_per_level.back();
      const std::string key = parsed.get<std::string>();
      if (std::find(seen.begin(), seen.end(), key) != seen.end() && duplicate.empty()) duplicate = key;
      seen.push_back(key);
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(text, callback, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const Json::parse_error& e) {
    auto [line, col] = line_and_column(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    const auto pos = what.find("syntax error");
    XTRAIN_USAGE_ERROR("config: ", origin, ":", line, ":", col, ": invalid JSON: ",
                       pos == std::string::npos ? what : what.substr(pos));
  }
  XTRAIN_USAGE_CHECK(duplicate.empty(), "config: ", origin, ": key \"", duplicate, "\" appears twice in one object");
  XTRAIN_USAGE_CHECK(j.is_object(), "config: ", origin, " must hold a JSON object, got ", json_type_name(j));
  return j;
}

Json parse_override_value(const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error&) {
    return Json(text);  // a bare word is a string: --set optimizer.type=AdamW
  }
}

void apply_override(Json& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  XTRAIN_USAGE_CHECK(eq != std::string::npos && eq > 0, "--set expects key.path=value, got '", assignment, "'");
  const std::string path = assignment.substr(0, eq);
  Json* node = &root;
  std::stringstream ss(path);
  std::string part, walked;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    walked = walked.empty() ? parts[i] : walked + "." + parts[i];
    XTRAIN_USAGE_CHECK(!parts[i].empty(), "--set ", path, ": empty key");
    if (!node->contains(parts[i]) || (*node)[parts[i]].is_null()) (*node)[parts[i]] = Json::object();
    node = &(*node)[parts[i]];
    XTRAIN_USAGE_CHECK(node->is_object(), "--set ", path, ": ", walked, " is not an object");
  }
  (*node)[parts.back()] = parse_override_value(assignment.substr(eq + 1));
}

void pre_pass(Json& root, std::vector<std::string>& warnings) {
  // Legacy "zero_optimization": true means stage 1.
  if (root.contains("zero_optimization") && root["zero_optimization"].is_boolean()) {
    const bool on = root["zero_optimization"].get<bool>();
    root["zero_optimization"] = Json{{"stage", on ? 1 : 0}};
    warnings.push_back("config: \"zero_optimization\": true/false is deprecated; use {\"stage\": N}");
  }
  for (const auto& name : kRecognisedOnly) {
    auto it = root.find(name);
    if (it == root.end()) continue;
    const bool enabled = it->is_object() && it->contains("enabled") && (*it)["enabled"].is_boolean() &&
                         (*it)["enabled"].get<bool>();
    XTRAIN_USAGE_CHECK(!enabled, "config: not supported yet: ", name, ".enabled");
    root.erase(it);
  }
}

void report_unknown(const ReadReport& report, std::vector<std::string>& warnings) {
  for (const auto& u : report.unknown) {
    const auto dot = u.path.rfind('.');
    const std::string key = dot == std::string::npos ? u.path : u.path.substr(dot + 1);
    const std::string prefix = dot == std::string::npos ? "" : u.path.substr(0, dot + 1);
    if (auto near = closest_match(key, u.siblings)) {
      XTRAIN_USAGE_ERROR("config: unknown key '", u.path, "' (did you mean '", prefix + *near, "'?)");
    }
    for (const auto& known : report.known_paths) {  // a known key at the wrong level
      const auto kdot = known.rfind('.');
      const std::string kkey = kdot == std::string::npos ? known : known.substr(kdot + 1);
      if (kkey == key && known != u.path) {
        XTRAIN_USAGE_ERROR("config: '", u.path, "' is not a key at this level (did you mean '", known, "'?)");
      }
    }
    warnings.push_back("config: ignoring unknown key '" + u.path + "'");
  }
}

void resolve(Config& c, const LoadOptions& options, std::vector<std::string>& notes) {
  const int64_t model_parallel = std::max<int64_t>(1, c.tensor_parallel.size) * std::max<int64_t>(1, c.pipeline.stages);
  XTRAIN_USAGE_CHECK(options.world_size % model_parallel == 0, "config: world size ", options.world_size,
                     " is not divisible by tensor_parallel.size (", c.tensor_parallel.size, ") * pipeline.stages (",
                     c.pipeline.stages, ")");
  c.dp_world_size = options.world_size / model_parallel;
  auto& e = c.engine;
  if (!e.train_batch_size && !e.train_micro_batch_size_per_gpu) {
    e.train_micro_batch_size_per_gpu = 8;  // xtrain's default when neither is given
    notes.push_back("train_micro_batch_size_per_gpu = 8 (default)");
  }
  BatchTriple b = resolve_batch(e.train_batch_size, e.train_micro_batch_size_per_gpu, e.gradient_accumulation_steps,
                                c.dp_world_size);
  e.train_batch_size = b.train_batch_size;
  e.train_micro_batch_size_per_gpu = b.micro_batch;
  e.gradient_accumulation_steps = b.grad_accum;
  if (!b.derived.empty()) {
    notes.push_back(c10::str("batch: train_batch_size=", b.train_batch_size, " micro_batch=", b.micro_batch,
                             " gradient_accumulation_steps=", b.grad_accum, " (dp=", c.dp_world_size,
                             "; derived: ", b.derived, ")"));
  }
  // Schedules that need the run length take it from xtrain.steps when not given.
  auto& s = c.scheduler;
  if ((s.type == "WarmupDecayLR" && s.warmup.total_num_steps <= 0) ||
      (s.type == "WarmupCosineLR" && s.cosine.total_num_steps <= 0)) {
    (s.type == "WarmupDecayLR" ? s.warmup.total_num_steps : s.cosine.total_num_steps) = c.trainer.steps;
    notes.push_back(c10::str("scheduler.params.total_num_steps = ", c.trainer.steps, " (from xtrain.steps)"));
  }
}

void validate(const Config& c) {
  XTRAIN_USAGE_CHECK(!(c.fp16.enabled && c.bf16.enabled),
                     "config: fp16.enabled and bf16.enabled are both true; choose one (bf16 needs no loss scaling)");
  XTRAIN_USAGE_CHECK(c.zero_optimization.stage >= 0 && c.zero_optimization.stage <= 3,
                     "config: zero_optimization.stage must be 0, 1, 2 or 3, got ", c.zero_optimization.stage);
  XTRAIN_USAGE_CHECK(c.engine.gradient_clipping >= 0, "config: gradient_clipping must be >= 0, got ",
                     c.engine.gradient_clipping);
  XTRAIN_USAGE_CHECK(c.engine.steps_per_print > 0, "config: steps_per_print must be > 0, got ",
                     c.engine.steps_per_print);
  const auto& o = c.optimizer;
  const auto& betas = o.type == "Lamb" ? o.lamb.betas : o.adam.betas;
  XTRAIN_USAGE_CHECK(betas.size() == 2, "config: optimizer.params.betas must hold 2 numbers, got ", betas.size());
  for (double b : betas) XTRAIN_USAGE_CHECK(b >= 0 && b < 1, "config: optimizer.params.betas must be in [0, 1), got ", b);
  XTRAIN_USAGE_CHECK(o.lr() >= 0, "config: optimizer.params.lr must be >= 0, got ", o.lr());
  XTRAIN_USAGE_CHECK(o.weight_decay() >= 0, "config: optimizer.params.weight_decay must be >= 0, got ", o.weight_decay());
  if (o.type == "SGD") {
    XTRAIN_USAGE_CHECK(!o.sgd.nesterov || (o.sgd.momentum > 0 && o.sgd.dampening == 0),
                       "config: optimizer.params.nesterov needs momentum > 0 and dampening = 0");
  }
  if (o.type == "Lamb") {
    XTRAIN_USAGE_CHECK(o.lamb.min_coeff <= o.lamb.max_coeff, "config: optimizer.params.min_coeff (", o.lamb.min_coeff,
                       ") must be <= max_coeff (", o.lamb.max_coeff, ")");
  }
  XTRAIN_USAGE_CHECK(!(o.type != "Lamb" && o.type != "SGD" && o.adam.amsgrad),
                     "config: not supported yet: optimizer.params.amsgrad");
  const auto& s = c.scheduler;
  if (s.type == "OneCycle") {
    XTRAIN_USAGE_CHECK(s.one_cycle.cycle_min_lr >= 0 && s.one_cycle.cycle_max_lr >= 0,
                       "config: scheduler.params.cycle_min_lr and cycle_max_lr are required for OneCycle");
  }
  if (s.type == "WarmupLR" || s.type == "WarmupDecayLR") {
    XTRAIN_USAGE_CHECK(s.warmup.warmup_num_steps >= 0, "config: scheduler.params.warmup_num_steps must be >= 0");
  }
  const auto& t = c.trainer;
  XTRAIN_USAGE_CHECK(t.steps > 0, "config: xtrain.steps must be > 0, got ", t.steps);
  XTRAIN_USAGE_CHECK(t.eval_interval >= 0, "config: xtrain.eval_interval must be >= 0, got ", t.eval_interval);
  XTRAIN_USAGE_CHECK(t.save_interval >= -1, "config: xtrain.save_interval must be >= -1, got ", t.save_interval);
  XTRAIN_USAGE_CHECK(t.keep_checkpoints >= 0, "config: xtrain.keep_checkpoints must be >= 0, got ", t.keep_checkpoints);
  XTRAIN_USAGE_CHECK(c.model.dropout >= 0 && c.model.dropout < 1, "config: xtrain.model.dropout must be in [0, 1), got ",
                     c.model.dropout);
  XTRAIN_USAGE_CHECK(c.data.val_fraction > 0 && c.data.val_fraction < 1,
                     "config: xtrain.data.val_fraction must be in (0, 1), got ", c.data.val_fraction);
}

}  // namespace

std::string normalise_optimizer_type(const std::string& type) {
  const std::vector<std::string> ours = {"Adam", "AdamW", "Lamb", "SGD"};
  for (const auto& name : ours) {
    if (edit_distance(type, name) == 0 && type.size() == name.size()) return name;  // case-insensitive equal
  }
  const std::vector<std::string> theirs = {"OneBitAdam", "ZeroOneAdam", "OneBitLamb", "Adagrad", "Lion",
                                           "MuAdam", "MuAdamW", "MuSGD", "RMSprop", "Adamax", "NAdam", "RAdam"};
  for (const auto& name : theirs) {
    XTRAIN_USAGE_CHECK(!(edit_distance(type, name) == 0 && type.size() == name.size()),
                       "config: not supported yet: optimizer.type=\"", type, "\" (xtrain has Adam, AdamW, Lamb, SGD)");
  }
  XTRAIN_USAGE_ERROR("config: optimizer.type must be one of \"Adam\", \"AdamW\", \"Lamb\", \"SGD\", got \"", type, "\"",
                     did_you_mean_suffix(type, ours));
}

std::string normalise_scheduler_type(const std::string& type) {
  if (type.empty()) return type;
  const std::vector<std::string> ours = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest",
                                         "Adaptive"};
  for (const auto& name : ours) {
    if (type == name) return name;
  }
  const std::vector<std::string> torch_names = {"StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                                "ReduceLROnPlateau", "CyclicLR", "LambdaLR", "LinearLR"};
  for (const auto& name : torch_names) {
    XTRAIN_USAGE_CHECK(type != name, "config: not supported yet: scheduler.type=\"", type,
                       "\" (xtrain has WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest, Adaptive;"
                       " Adaptive reduces the lr on a plateau)");
  }
  XTRAIN_USAGE_ERROR("config: scheduler.type must be one of WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, "
                     "LRRangeTest, Adaptive, got \"", type, "\"", did_you_mean_suffix(type, ours));
}

std::vector<std::string> unsupported_features(const Config& c) {
  std::vector<std::string> out;
  auto add = [&](bool on, const char* key) {
    if (on) out.emplace_back(key);
  };
  add(c.fp16.fp16_master_weights_and_grads, "fp16.fp16_master_weights_and_grads");
  add(c.zero_optimization.zero_quantized_weights || c.zero_optimization.zero_quantized_gradients ||
          c.zero_optimization.zero_quantized_nontrainable_weights || c.zero_optimization.zero_hpz_partition_size > 1,
      "zero_optimization.zero_quantized_* (ZeRO++)");
  add(c.zero_optimization.mics_shard_size > 0, "zero_optimization.mics_shard_size");
  add(c.wandb.enabled, "wandb.enabled");
  add(c.comet.enabled, "comet.enabled");
  add(c.comms_logger.enabled, "comms_logger.enabled");
  add(c.engine.sparse_gradients, "sparse_gradients");
  return out;
}

Loaded load_text(const std::string& text, const LoadOptions& options, const std::string& origin) {
  Loaded out;
  Json root = text.empty() ? Json::object() : parse_json(text, origin);
  for (const auto& o : options.overrides) apply_override(root, o);
  pre_pass(root, out.warnings);
  ReadReport report;
  JsonReader reader(root, "", &report);
  out.config.visit(reader);
  reader.finish();
  for (auto& w : report.warnings) out.warnings.push_back(w);
  report_unknown(report, out.warnings);
  for (const auto& [path, how] : report.auto_resolved) out.notes.push_back(path + " = auto -> " + how);
  resolve(out.config, options, out.notes);
  validate(out.config);
  const auto missing = unsupported_features(out.config);
  XTRAIN_USAGE_CHECK(missing.empty(), "config: not supported yet: ", missing.front());
  return out;
}

Loaded load(const std::string& path, const LoadOptions& options) {
  if (path.empty()) return load_text("", options, "<defaults>");
  std::ifstream in(path);
  XTRAIN_USAGE_CHECK(in.good(), "config: cannot read '", path, "' (does the file exist? examples are in configs/)");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_text(ss.str(), options, path);
}

std::string to_json(const Config& config, int indent) {
  Config copy = config;
  Json out = Json::object();
  JsonWriter writer(&out);
  copy.visit(writer);
  if (copy.scheduler.type.empty()) out.erase("scheduler");
  return out.dump(indent);
}

std::string markdown_reference() {
  Config c;
  std::vector<std::string> rows;
  DocWriter writer("", &rows);
  c.visit(writer);
  std::string md =
      "# Configuration reference\n\n"
      "Generated by `xtrain config --docs` from the options each area declares; do not edit by hand.\n\n"
      "xtrain reads DeepSpeed's `ds_config.json`: DeepSpeed's keys keep DeepSpeed's names, defaults and meaning.\n"
      "Keys DeepSpeed does not have live under `\"xtrain\"`, except the top-level `tf32` section; their descriptions\n"
      "start with \"xtrain:\". `\"auto\"` takes the default (the batch triple is derived). A key close to a known one is\n"
      "an error naming the right key; other unknown keys are ignored with a warning. Enabling a DeepSpeed feature\n"
      "xtrain does not implement yet is an error (\"not supported yet: <key>\").\n\n"
      "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& r : rows) md += r + "\n";
  return md;
}

}  // namespace xtrain::config
