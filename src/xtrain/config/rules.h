// DeepSpeed's acceptance rules, applied around the visit (config.cpp): what DeepSpeed accepts is
// accepted (extra bf16 keys, recognised sections xtrain does not implement, "FP16" spellings,
// settings it ignores), with one line where it has no effect here; what it rejects is rejected with
// its reason; keys a file sets get their key_status (refused / no effect). Included by config.cpp only.
#pragma once
#include <string>
#include <vector>

#include "xtrain/config/config.h"
#include "xtrain/config/visitors.h"

namespace xtrain::config {

// What loading found: warnings and notes for the start-up log, errors reported together.
struct Findings {
  std::vector<std::string> warnings;
  std::vector<std::string> notes;
  std::vector<std::string> errors;
};

// Facts about the raw file the rules after the visit need.
struct FileFacts {
  bool fp16_names_scaler_keys = false;  // fp16 names initial_scale_power, loss_scale_window, ...
};

// On the raw JSON, before the visit: legacy forms, recognised-only DeepSpeed sections and keys,
// extra bf16 keys, case-insensitive spellings.
FileFacts before_visit(Json& root, Findings& f);

// Keys DeepSpeed defaults to null: null there means the default.
const std::vector<std::string>& null_default_keys();

// After the visit, on the typed config: settings DeepSpeed ignores or resolves in its own way.
void after_visit(Config& c, const FileFacts& facts, Findings& f);

// Each key the file sets, against its key_status: a refused key at a value other than its default
// is an error, a no-effect key at a value other than its default gets its start-up line.
void apply_key_statuses(const std::vector<std::pair<std::string, Json>>& present, const std::vector<KeyRow>& rows,
                        Findings& f);

// DeepSpeed sections and top-level keys xtrain recognises without reading them into Config, with
// what becomes of them (docs/config.md lists them).
struct RecognisedKey {
  const char* key;
  const char* refuse_when;  // "enabled": refused when {"enabled": true}; "present": always; "!=1": unless 1; "": never
  const char* reason;       // why it has no effect here (or what to use instead when refused)
};
const std::vector<RecognisedKey>& recognised_keys();

}  // namespace xtrain::config
