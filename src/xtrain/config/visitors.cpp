#include "xtrain/config/visitors.h"

#include <cmath>
#include <sstream>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::config {

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string json_type_name(const Json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "bool";
  if (j.is_number_integer() || j.is_number_unsigned()) return "int";
  if (j.is_number_float()) return "float";
  if (j.is_string()) return "string";
  if (j.is_array()) return "list";
  return "object";
}

namespace {
std::string shown(const Json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}
[[noreturn]] void type_error(const Json& j, const std::string& path, const char* expected) {
  XTRAIN_USAGE_ERROR("config: ", path, " must be ", expected, ", got ", shown(j), " (", json_type_name(j), ")",
                     j.is_null() ? "; null is not its DeepSpeed default: drop the key to use the default" : "");
}
}  // namespace

void read_value(const Json& j, const std::string& path, bool& out) {
  if (!j.is_boolean()) type_error(j, path, "true or false");
  out = j.get<bool>();
}

void read_value(const Json& j, const std::string& path, int64_t& out) {
  if (j.is_number_integer() || j.is_number_unsigned()) {
    out = j.get<int64_t>();
    return;
  }
  if (j.is_number_float()) {  // 5e8 and 1.000000e+09 are integers in DeepSpeed configs
    const double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
      out = static_cast<int64_t>(d);
      return;
    }
  }
  type_error(j, path, "an integer");
}

void read_value(const Json& j, const std::string& path, int& out) {
  int64_t v = 0;
  read_value(j, path, v);
  out = static_cast<int>(v);
}

void read_value(const Json& j, const std::string& path, double& out) {
  if (!j.is_number()) type_error(j, path, "a number");
  out = j.get<double>();
}

void read_value(const Json& j, const std::string& path, std::string& out) {
  if (j.is_null()) {
    out.clear();
    return;
  }
  if (!j.is_string()) type_error(j, path, "a string");
  out = j.get<std::string>();
}

void read_value(const Json& j, const std::string& path, std::vector<double>& out) {
  if (!j.is_array()) type_error(j, path, "a list of numbers");
  out.clear();
  for (size_t i = 0; i < j.size(); ++i) {
    double v = 0;
    read_value(j[i], path + "[" + std::to_string(i) + "]", v);
    out.push_back(v);
  }
}

void read_value(const Json& j, const std::string& path, std::vector<int64_t>& out) {
  if (!j.is_array()) type_error(j, path, "a list of integers");
  out.clear();
  for (size_t i = 0; i < j.size(); ++i) {
    int64_t v = 0;
    read_value(j[i], path + "[" + std::to_string(i) + "]", v);
    out.push_back(v);
  }
}

void read_value(const Json& j, const std::string& path, std::vector<std::string>& out) {
  if (!j.is_array()) type_error(j, path, "a list of strings");
  out.clear();
  for (size_t i = 0; i < j.size(); ++i) {
    std::string v;
    read_value(j[i], path + "[" + std::to_string(i) + "]", v);
    out.push_back(v);
  }
}

void read_value(const Json& j, const std::string& path, Json& out) {
  if (j.is_null()) {
    out = Json::object();
    return;
  }
  if (!j.is_object()) type_error(j, path, "an object (the model's or dataset's own settings)");
  out = j;
}

void check_choice(const std::string& value, const std::string& path,
                  std::initializer_list<const char*> choices) {
  std::vector<std::string> names;
  for (const char* c : choices) {
    if (value == c) return;
    names.emplace_back(c);
  }
  std::ostringstream list;
  for (size_t i = 0; i < names.size(); ++i) list << (i ? ", " : "") << '"' << names[i] << '"';
  XTRAIN_USAGE_ERROR("config: ", path, " must be one of ", list.str(), ", got \"", value, "\"",
                     did_you_mean_suffix(value, names));
}

JsonReader::JsonReader(Json object, std::string path, ReadReport* report)
    : object_(std::move(object)), path_(std::move(path)), report_(report) {}

const Json* JsonReader::take(const char* key) {
  known_.emplace_back(key);
  report_->known_paths.push_back(join_path(path_, key));
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

bool JsonReader::is_auto(const Json& j, const char* key) {
  if (!j.is_string() || j.get<std::string>() != "auto") return false;
  report_->auto_resolved.emplace_back(join_path(path_, key), "default");
  return true;
}

bool JsonReader::scalar(const Json* j, const char* key) {
  if (!j || is_auto(*j, key)) return false;
  const std::string path = join_path(path_, key);
  if (j->is_null()) {
    const auto& nd = report_->null_defaults;
    if (std::find(nd.begin(), nd.end(), path) != nd.end()) return false;
  }
  return true;
}

bool JsonReader::expect_object(const Json& j, const std::string& path) {
  if (j.is_object()) return true;
  guarded([&] { type_error(j, path, "an object"); });
  return false;
}

bool JsonReader::expect_list(const Json& j, const std::string& path) {
  if (j.is_array()) return true;
  guarded([&] { type_error(j, path, "a list of objects"); });
  return false;
}

void JsonReader::alias(const char* old_key, const char* new_path, const char* value) {
  known_.emplace_back(old_key);
  auto it = object_.find(old_key);
  if (it == object_.end()) return;
  const std::string old_path = join_path(path_, old_key);
  const std::string current = join_path(path_, new_path);
  // Walk/create the destination (one level of nesting is enough for DeepSpeed's aliases).
  std::string head = new_path, tail;
  const auto dot = head.find('.');
  if (dot != std::string::npos) {
    tail = head.substr(dot + 1);
    head = head.substr(0, dot);
  }
  Json replacement = *it;
  if (*value != '\0') {
    bool on = false;
    try {
      read_value(*it, old_path, on);
    } catch (const std::runtime_error& e) {
      report_->errors.emplace_back(e.what());
      object_.erase(it);
      return;
    }
    if (!on) {
      object_.erase(it);
      report_->warnings.push_back("config: " + old_path + " is deprecated; use " + current);
      return;
    }
    replacement = value;
  }
  const bool present = tail.empty()
                           ? object_.contains(head)
                           : object_.contains(head) && object_[head].is_object() && object_[head].contains(tail);
  if (present) {
    report_->errors.push_back("config: " + old_path + " is a deprecated alias of " + current + "; give only one of them");
    object_.erase(old_key);
    return;
  }
  if (tail.empty()) {
    object_[head] = replacement;
  } else {
    if (!object_.contains(head) || !object_[head].is_object()) object_[head] = Json::object();
    object_[head][tail] = replacement;
  }
  object_.erase(old_key);
  report_->warnings.push_back("config: " + old_path + " is deprecated; use " + current);
}

void JsonReader::forbid(const char* key, const char* reason) {
  known_.emplace_back(key);
  if (object_.contains(key)) {
    report_->errors.push_back("config: " + join_path(path_, key) + " is not allowed: " + reason);
  }
}

void JsonReader::finish() {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
    const bool inert = it.value().is_null() || (it.value().is_string() && it.value().get<std::string>() == "auto");
    report_->unknown.push_back({join_path(path_, it.key()), known_, inert});
  }
}

void DocWriter::choice(const char* key, std::string& member, std::initializer_list<const char*> choices,
                       const char* doc) {
  std::string type;
  for (const char* c : choices) type += (type.empty() ? "" : " \\| ") + std::string(*c ? c : "null");
  // An empty choice is null in the file and in the docs; the reader and the writer hold it as "".
  row(key, type, Json(member), doc, member.empty() ? "null" : nullptr);
  for (const char* c : choices) rows_->back().choices.emplace_back(c);
}

void DocWriter::alias(const char* old_key, const char* new_path, const char* value) {
  KeyRow r;
  r.key = join_path(path_, old_key);
  r.type = "deprecated";
  r.doc = "alias of `" + join_path(path_, new_path) + "`" + (*value ? std::string(" = \"") + value + "\"" : std::string());
  r.alias = true;
  rows_->push_back(std::move(r));
}

void DocWriter::row(const char* key, const std::string& type, const Json& def, const char* doc, const char* shown) {
  KeyRow r;
  r.key = join_path(path_, key);
  r.type = type;
  r.default_value = def;
  r.default_text = shown ? shown : def.dump();
  r.doc = doc;
  rows_->push_back(std::move(r));
}

}  // namespace xtrain::config
