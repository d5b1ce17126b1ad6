#include "xtrain/config/config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/config/batch.h"
#include "xtrain/config/config_visit.h"
#include "xtrain/config/key_status.h"
#include "xtrain/config/rules.h"
#include "xtrain/config/optimizer_types.h"
#include "xtrain/config/scheduler_types.h"
#include "xtrain/config/validate.h"
#include "xtrain/config/visitors.h"

namespace xtrain::config {
namespace {

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
  XTRAIN_USAGE_CHECK(text.find_first_not_of(" \t\r\n") != std::string::npos, "config: ", origin,
                     ":1:1: invalid JSON: the file is empty (DeepSpeed's json.load says \"Expecting value\"); a config with "
                     "every default is {}");
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

void report_unknown(const ReadReport& report, Findings& f) {
  for (const auto& u : report.unknown) {
    const auto dot = u.path.rfind('.');
    const std::string key = dot == std::string::npos ? u.path : u.path.substr(dot + 1);
    const std::string prefix = dot == std::string::npos ? "" : u.path.substr(0, dot + 1);
    if (auto near = closest_match(key, u.siblings)) {
      // A misspelt "auto" or null changes nothing (the right key would take its default too), so a
      // real file with one still runs, as it does under DeepSpeed; any other value is an error.
      const std::string message = "unknown key '" + u.path + "' (did you mean '" + prefix + *near + "'?)";
      if (u.inert) {
        f.warnings.push_back("config: ignoring " + message + ": its value changes nothing");
      } else {
        f.errors.push_back("config: " + message);
      }
      continue;
    }
    std::string elsewhere;
    for (const auto& known : report.known_paths) {  // a known key at the wrong level
      const auto kdot = known.rfind('.');
      const std::string kkey = kdot == std::string::npos ? known : known.substr(kdot + 1);
      if (kkey == key && known != u.path) {
        elsewhere = known;
        break;
      }
    }
    if (!elsewhere.empty()) {
      f.errors.push_back("config: '" + u.path + "' is not a key at this level (did you mean '" + elsewhere + "'?)");
    } else {
      f.warnings.push_back("config: ignoring unknown key '" + u.path + "'");
    }
  }
}

void resolve(Config& c, const LoadOptions& options, std::vector<std::string>& notes) {
  const int64_t model_parallel = std::max<int64_t>(1, c.tensor_parallel.size) * std::max<int64_t>(1, c.pipeline.stages);
  const char* tp_key = c.tensor_parallel.autotp_size > 0 ? "tensor_parallel.autotp_size" : "tensor_parallel.size";
  XTRAIN_USAGE_CHECK(options.world_size % model_parallel == 0, "config: world size ", options.world_size,
                     " is not divisible by ", tp_key, " (", c.tensor_parallel.size, ") * pipeline.stages (",
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
  const SchedulerType* type = scheduler_types().lookup(c.scheduler.type);
  if (type && type->resolve) {
    const std::string note = type->resolve(c.scheduler, c.trainer.steps);
    if (!note.empty()) notes.push_back(note);
  }
}

}  // namespace

namespace {

// Throws one UsageError listing every problem found, each naming its key.
void throw_if_any(const std::vector<std::string>& errors, const std::string& origin) {
  if (errors.empty()) return;
  if (errors.size() == 1) throw UsageError(errors.front());
  std::string m = c10::str("config: ", origin, " has ", errors.size(), " errors:");
  for (const auto& e : errors) m += "\n  " + e;
  throw UsageError(m);
}

// Reads the JSON into the typed config; errors join f.errors instead of stopping at the first.
void read(Json& root, Config& config, Findings& f) {
  const FileFacts facts = before_visit(root, f);
  ReadReport report;
  report.null_defaults = null_default_keys();
  JsonReader reader(root, "", &report);
  try {
    config.visit(reader);
    reader.finish();
  } catch (const std::runtime_error& e) {  // a type name the visit itself rejects
    report.errors.emplace_back(e.what());
  }
  f.errors.insert(f.errors.end(), report.errors.begin(), report.errors.end());
  f.warnings.insert(f.warnings.end(), report.warnings.begin(), report.warnings.end());
  report_unknown(report, f);
  apply_key_statuses(report.present, key_rows(), f);
  for (const auto& [path, how] : report.auto_resolved) f.notes.push_back(path + " = auto -> " + how);
  after_visit(config, facts, f);
}

}  // namespace

Loaded load_text(const std::string& text, const LoadOptions& options, const std::string& origin) {
  Json root = parse_json(text, origin);
  for (const auto& o : options.overrides) apply_override(root, o);
  Findings f;
  Loaded out;
  read(root, out.config, f);
  try {
    resolve(out.config, options, f.notes);
  } catch (const UsageError& e) {
    f.errors.emplace_back(e.what());
  }
  validate(out.config, f.errors);
  throw_if_any(f.errors, origin);
  out.warnings = std::move(f.warnings);
  out.notes = std::move(f.notes);
  return out;
}

Loaded load(const std::string& path, const LoadOptions& options) {
  if (path.empty()) return load_text("{}", options, "<defaults>");
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

std::vector<KeyRow> key_rows() {
  Config c;
  std::vector<KeyRow> rows;
  DocWriter writer("", &rows);
  c.visit(writer);
  return rows;
}

namespace {

std::string status_cell(const KeyRow& r) {
  const KeyStatus* s = find_key_status(r.key);
  if (!s) return "";
  if (s->state == KeyState::honoured) return "honoured";
  if (s->state == KeyState::refused) return std::string("refused: not supported yet") + (*s->detail ? std::string(" (") + s->detail + ")" : "");
  return std::string("no effect here: ") + s->detail;
}

const char* const kPreamble =
    "# Configuration reference\n\n"
    "Generated by `xtrain config --docs` from the options each area declares; do not edit by hand.\n\n"
    "xtrain reads DeepSpeed's `ds_config.json`: DeepSpeed's keys keep DeepSpeed's names, defaults and meaning\n"
    "(as of DeepSpeed 0.16). Keys DeepSpeed does not have live under `\"xtrain\"`, except\n"
    "the top-level `tf32` section; their descriptions start with \"xtrain:\". `\"auto\"` takes the default (the batch\n"
    "triple is derived); `null` does too where DeepSpeed's default is null. A key close to a known one is an error\n"
    "naming the right key; other unknown keys are ignored with a warning, as DeepSpeed ignores them. Every error in a\n"
    "file is reported at once.\n\n"
    "Nothing is silently ignored. The status column says what happens to each key: *honoured* (a test fails if it\n"
    "is dropped: `src/xtrain/config/key_status.cpp` names it), *refused* (a value other than the default is the\n"
    "error \"not supported yet: <key>\"), or *no effect here* (the key cannot matter on this build; a file that sets\n"
    "it to a value other than the default gets one start-up line saying so and why).\n\n"
    "| key | type | default | meaning | status |\n|---|---|---|---|---|\n";

// The optimizer and scheduler registries (config/optimizer_types.h, config/scheduler_types.h):
// each type with what it is and where its keys are listed above.
std::string registered_types() {
  std::string md =
      "\n## Registered optimizers and schedules\n\n"
      "`optimizer.type` and `scheduler.type` name entries of registries (`optim/registry.h`, `sched/registry.h`);\n"
      "a program or plugin adds its own with one registration call. `xtrain.loss.type` names an entry of\n"
      "`nn/losses_registry.h` (built in: `cross_entropy`, `focal`).\n\n"
      "| key | type | what it is | keys |\n|---|---|---|---|\n";
  auto rows = [&md](const char* key, const auto& names, auto& types, const char* section) {
    std::string label;
    for (const auto& name : names) {
      const auto& t = types.find(name, key);
      if (!t.params_label.empty()) label = t.params_label;
      md += std::string("| `") + key + "` | `" + name + "` | " + t.description + " | `" + section + "." + label + "` |\n";
    }
  };
  rows("optimizer.type", optimizer_types().names(), optimizer_types(), "optimizer");
  rows("scheduler.type", scheduler_types().names(), scheduler_types(), "scheduler");
  return md;
}

std::vector<std::pair<int, std::string (*)()>>& reference_sections() {
  static std::vector<std::pair<int, std::string (*)()>> sections;
  return sections;
}

}  // namespace

bool add_reference_section(int order, std::string (*section)()) {
  reference_sections().emplace_back(order, section);
  return true;
}

std::string markdown_reference() {
  std::string md = kPreamble;
  for (const auto& r : key_rows()) {
    const std::string def = r.alias ? "" : "`" + r.default_text + "`";
    md += "| `" + r.key + "` | " + r.type + " | " + def + " | " + r.doc + " | " + status_cell(r) + " |\n";
  }
  md += registered_types();
  md += "\n## DeepSpeed sections and keys read only to be reported\n\n"
        "DeepSpeed features xtrain does not implement. A section whose `enabled` is true (or a key set to a value\n"
        "that would change training) is refused as \"not supported yet\"; otherwise the file gets one line saying\n"
        "the key has no effect here.\n\n"
        "| key | refused when | why |\n|---|---|---|\n";
  for (const auto& k : recognised_keys()) {
    const std::string when = k.refuse_when;
    const std::string shown = when == "enabled" ? "`enabled` is true" : when == "present" ? "present" : when == "!=1" ? "not 1" : "never";
    md += std::string("| `") + k.key + "` | " + shown + " | " + k.reason + " |\n";
  }
  md += "\nDeepSpeed 0.16's fp16 quirk is kept: with `fp16.enabled` and a block that names none of\n"
        "`initial_scale_power`, `loss_scale_window`, `min_loss_scale`, `hysteresis`, `consecutive_hysteresis`, the dynamic\n"
        "scaler starts at 2^32 with hysteresis 1 under ZeRO (2^16, hysteresis 1 at stage 0). DeepSpeed 0.17.1 and later\n"
        "always use the documented defaults and refuse extra keys in `bf16`; xtrain accepts those with a warning.\n";
  auto sections = reference_sections();
  std::stable_sort(sections.begin(), sections.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, section] : sections) md += section();
  return md;
}

}  // namespace xtrain::config
