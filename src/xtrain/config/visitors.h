// The three visitors that walk an options struct's `visit(v)`: JsonReader (JSON -> struct, with
// type errors naming the key path, "auto" resolved to the default, aliases and unknown-key
// collection), JsonWriter (struct -> resolved JSON) and DocWriter (struct -> markdown rows).
// One list of keys per struct drives all three, so docs/config.md cannot drift from the code.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace xtrain::config {

using Json = nlohmann::json;

// What reading a config found besides values: keys resolved from "auto", keys not recognised,
// deprecated aliases used, and every key path the schema knows (to suggest the right level).
struct ReadReport {
  std::vector<std::pair<std::string, std::string>> auto_resolved;  // path, value
  struct Unknown {
    std::string path;                  // full dotted path
    std::vector<std::string> siblings;  // known keys at the same level
  };
  std::vector<Unknown> unknown;
  std::vector<std::string> warnings;
  std::vector<std::string> known_paths;
};

std::string join_path(const std::string& prefix, const std::string& key);
std::string json_type_name(const Json& j);

// Typed conversions with errors that name the path and the offending value.
void read_value(const Json& j, const std::string& path, bool& out);
void read_value(const Json& j, const std::string& path, int64_t& out);
void read_value(const Json& j, const std::string& path, int& out);
void read_value(const Json& j, const std::string& path, double& out);
void read_value(const Json& j, const std::string& path, std::string& out);
void read_value(const Json& j, const std::string& path, std::vector<double>& out);
void read_value(const Json& j, const std::string& path, std::vector<int64_t>& out);
void read_value(const Json& j, const std::string& path, std::vector<std::string>& out);
void check_choice(const std::string& value, const std::string& path,
                  std::initializer_list<const char*> choices);

template <class T, class = void>
struct has_visit : std::false_type {};
template <class T>
struct has_visit<T, std::void_t<decltype(&T::template visit<int>)>> : std::true_type {};

class JsonReader {
 public:
  JsonReader(Json object, std::string path, ReadReport* report);

  template <class T>
  void operator()(const char* key, T& member, const char* doc = "") {
    const Json* j = take(key);
    if constexpr (has_visit<T>::value) {
      // An absent section is still walked (with no keys) so its key paths are known for
      // "did you mean" suggestions.
      const bool present = j && !j->is_null();
      if (present) expect_object(*j, join_path(path_, key));
      JsonReader sub(present ? *j : Json::object(), join_path(path_, key), report_);
      member.visit(sub);
      sub.finish();
    } else {
      if (!j) return;
      if (is_auto(*j, key)) return;
      read_value(*j, join_path(path_, key), member);
    }
  }
  void choice(const char* key, std::string& member, std::initializer_list<const char*> choices,
              const char* doc = "") {
    const Json* j = take(key);
    if (!j || is_auto(*j, key)) return;
    read_value(*j, join_path(path_, key), member);
    check_choice(member, join_path(path_, key), choices);
  }
  void optional(const char* key, std::optional<int64_t>& member, const char* doc = "") {
    const Json* j = take(key);
    if (!j || j->is_null()) return;
    if (j->is_string() && j->get<std::string>() == "auto") {
      member.reset();
      report_->auto_resolved.emplace_back(join_path(path_, key), "derived");
      return;
    }
    int64_t v = 0;
    read_value(*j, join_path(path_, key), v);
    member = v;
  }
  void tristate(const char* key, int& member, const char* doc = "") {
    const Json* j = take(key);
    if (!j || j->is_null() || is_auto(*j, key)) return;
    bool v = false;
    read_value(*j, join_path(path_, key), v);
    member = v ? 1 : 0;
  }
  template <class F>
  void nested(const char* key, F&& fields) {
    const Json* j = take(key);
    JsonReader sub(j && !j->is_null() ? *j : Json::object(), join_path(path_, key), report_);
    if (j && !j->is_null()) expect_object(*j, join_path(path_, key));
    fields(sub);
    sub.finish();
  }
  // A deprecated key: `old_key: true` sets `new_path` to `value`, or (value "") renames.
  void alias(const char* old_key, const char* new_path, const char* value);
  // A key that is an error here, with the reason.
  void forbid(const char* key, const char* reason);
  bool has(const char* key) const { return object_.contains(key); }
  bool documenting() const { return false; }
  const std::string& path() const { return path_; }
  void finish();

 private:
  const Json* take(const char* key);
  bool is_auto(const Json& j, const char* key);
  static void expect_object(const Json& j, const std::string& path);

  Json object_;
  std::string path_;
  ReadReport* report_;
  std::vector<std::string> known_;
};

class JsonWriter {
 public:
  explicit JsonWriter(Json* out) : out_(out) {}
  template <class T>
  void operator()(const char* key, T& member, const char* doc = "") {
    if constexpr (has_visit<T>::value) {
      Json sub = Json::object();
      JsonWriter w(&sub);
      member.visit(w);
      (*out_)[key] = sub;
    } else {
      (*out_)[key] = member;
    }
  }
  void choice(const char* key, std::string& member, std::initializer_list<const char*>, const char* = "") {
    (*out_)[key] = member;
  }
  void optional(const char* key, std::optional<int64_t>& member, const char* = "") {
    if (member) (*out_)[key] = *member;
  }
  void tristate(const char* key, int& member, const char* = "") {
    if (member >= 0) (*out_)[key] = member != 0;
  }
  template <class F>
  void nested(const char* key, F&& fields) {
    Json sub = Json::object();
    JsonWriter w(&sub);
    fields(w);
    (*out_)[key] = sub;
  }
  void alias(const char*, const char*, const char*) {}
  void forbid(const char*, const char*) {}
  bool has(const char*) const { return true; }
  bool documenting() const { return false; }

 private:
  Json* out_;
};

// Markdown rows: | key | type | default | meaning |
class DocWriter {
 public:
  DocWriter(std::string path, std::vector<std::string>* rows) : path_(std::move(path)), rows_(rows) {}
  template <class T>
  void operator()(const char* key, T& member, const char* doc = "") {
    if constexpr (has_visit<T>::value) {
      DocWriter sub(join_path(path_, key), rows_);
      member.visit(sub);
    } else {
      row(key, type_name(member), Json(member).dump(), doc);
    }
  }
  void choice(const char* key, std::string& member, std::initializer_list<const char*> choices,
              const char* doc = "");
  void optional(const char* key, std::optional<int64_t>&, const char* doc = "") {
    row(key, "int", "derived", doc);
  }
  void tristate(const char* key, int&, const char* doc = "") { row(key, "bool", "null", doc); }
  template <class F>
  void nested(const char* key, F&& fields) {
    DocWriter sub(join_path(path_, key), rows_);
    fields(sub);
  }
  void alias(const char* old_key, const char* new_path, const char* value);
  void forbid(const char*, const char*) {}
  bool has(const char*) const { return true; }
  bool documenting() const { return true; }

 private:
  void row(const char* key, const std::string& type, const std::string& def, const char* doc);
  static std::string type_name(bool) { return "bool"; }
  static std::string type_name(int64_t) { return "int"; }
  static std::string type_name(int) { return "int"; }
  static std::string type_name(double) { return "float"; }
  static std::string type_name(const std::string&) { return "string"; }
  static std::string type_name(const std::vector<double>&) { return "list of float"; }
  static std::string type_name(const std::vector<int64_t>&) { return "list of int"; }
  static std::string type_name(const std::vector<std::string>&) { return "list of string"; }
  std::string path_;
  std::vector<std::string>* rows_;
};

}  // namespace xtrain::config
