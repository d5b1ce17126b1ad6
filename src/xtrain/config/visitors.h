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
// deprecated aliases used, every key path the schema knows (to suggest the right level), the keys
// the file sets, and every error (a file's errors are reported together, not only the first).
struct ReadReport {
  std::vector<std::pair<std::string, std::string>> auto_resolved;  // path, value
  struct Unknown {
    std::string path;                  // full dotted path
    std::vector<std::string> siblings;  // known keys at the same level
    bool inert = false;                 // "auto" or null: reading it or not gives the same config
  };
  std::vector<Unknown> unknown;
  std::vector<std::string> warnings;
  std::vector<std::string> known_paths;
  std::vector<std::pair<std::string, Json>> present;  // keys the file sets (not null, not "auto"), with values
  std::vector<std::string> errors;                    // each names its key
  std::vector<std::string> null_defaults;             // keys whose DeepSpeed default is null: null = the default
};

// One row of docs/config.md: a key the visit lists, with its default as JSON (null for "derived"
// and null defaults) and, for choices, the allowed values.
struct KeyRow {
  std::string key;  // "optimizer.params (Lamb).max_coeff"
  std::string type;
  std::string default_text;
  std::string doc;
  Json default_value;
  std::vector<std::string> choices;
  bool alias = false;  // a deprecated alias of another key
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
// A free JSON object (xtrain.model.args, xtrain.data.args): read whole, its keys left to its user.
void read_value(const Json& j, const std::string& path, Json& out);
void check_choice(const std::string& value, const std::string& path,
                  std::initializer_list<const char*> choices);

template <class T, class = void>
struct has_visit : std::false_type {};
template <class T>
struct has_visit<T, std::void_t<decltype(&T::template visit<int>)>> : std::true_type {};

// A list of objects, each an options struct with visit(V&) (xtrain.param_groups).
template <class T>
struct is_object_list : std::false_type {};
template <class T>
struct is_object_list<std::vector<T>> : has_visit<T> {};

class JsonReader {
 public:
  JsonReader(Json object, std::string path, ReadReport* report);

  template <class T>
  void operator()(const char* key, T& member, const char* doc = "") {
    const Json* j = take(key);
    if constexpr (has_visit<T>::value) {
      // An absent section is still walked (with no keys) so its key paths are known for
      // "did you mean" suggestions; a section that is not an object is an error, then walked empty.
      const bool present = j && !j->is_null() && expect_object(*j, join_path(path_, key));
      JsonReader sub(present ? *j : Json::object(), join_path(path_, key), report_);
      member.visit(sub);
      sub.finish();
    } else if constexpr (is_object_list<T>::value) {
      if (!scalar(j, key) || !expect_list(*j, join_path(path_, key))) return;
      member.clear();
      for (size_t i = 0; i < j->size(); ++i) {
        const std::string at = join_path(path_, key) + "[" + std::to_string(i) + "]";
        const bool object = expect_object((*j)[i], at);
        JsonReader sub(object ? (*j)[i] : Json::object(), at, report_);
        member.emplace_back();
        member.back().visit(sub);
        sub.finish();
      }
      set(key, *j);
    } else {
      if (!scalar(j, key)) return;
      if (guarded([&] { read_value(*j, join_path(path_, key), member); })) set(key, *j);
    }
  }
  void choice(const char* key, std::string& member, std::initializer_list<const char*> choices,
              const char* doc = "") {
    const Json* j = take(key);
    if (!scalar(j, key)) return;
    const bool ok = guarded([&] {
      read_value(*j, join_path(path_, key), member);
      check_choice(member, join_path(path_, key), choices);
    });
    if (ok) set(key, *j);
  }
  void optional(const char* key, std::optional<int64_t>& member, const char* doc = "") {
    const Json* j = take(key);
    if (!j || j->is_null()) return;
    if (j->is_string() && j->get<std::string>() == "auto") {
      member.reset();
      report_->auto_resolved.emplace_back(join_path(path_, key), "derived");
      return;
    }
    const bool ok = guarded([&] {
      int64_t v = 0;
      read_value(*j, join_path(path_, key), v);
      member = v;
    });
    if (ok) set(key, *j);
  }
  void tristate(const char* key, int& member, const char* doc = "") {
    const Json* j = take(key);
    if (!j || j->is_null() || is_auto(*j, key)) return;
    const bool ok = guarded([&] {
      bool v = false;
      read_value(*j, join_path(path_, key), v);
      member = v ? 1 : 0;
    });
    if (ok) set(key, *j);
  }
  template <class F>
  void nested(const char* key, F&& fields) {
    const Json* j = take(key);
    const bool present = j && !j->is_null() && expect_object(*j, join_path(path_, key));
    JsonReader sub(present ? *j : Json::object(), join_path(path_, key), report_);
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
  // Whether a scalar key has a value to read: absent, "auto" and (where DeepSpeed's default is
  // null) null keep the default.
  bool scalar(const Json* j, const char* key);
  // Records a key the file sets (read without error; null is not a setting).
  void set(const char* key, const Json& value) {
    if (!value.is_null()) report_->present.emplace_back(join_path(path_, key), value);
  }
  bool expect_object(const Json& j, const std::string& path);  // false (and an error) if not an object
  bool expect_list(const Json& j, const std::string& path);    // false (and an error) if not a list
  // Runs a read; a UsageError joins the report's errors instead of stopping the visit.
  template <class F>
  bool guarded(F&& read) {
    try {
      read();
      return true;
    } catch (const std::runtime_error& e) {
      report_->errors.emplace_back(e.what());
      return false;
    }
  }

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
    } else if constexpr (is_object_list<T>::value) {
      Json list = Json::array();
      for (auto& element : member) {
        Json sub = Json::object();
        JsonWriter w(&sub);
        element.visit(w);
        list.push_back(sub);
      }
      (*out_)[key] = list;
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

// The key list (docs/config.md's rows): key, type, default, meaning.
class DocWriter {
 public:
  DocWriter(std::string path, std::vector<KeyRow>* rows) : path_(std::move(path)), rows_(rows) {}
  template <class T>
  void operator()(const char* key, T& member, const char* doc = "") {
    if constexpr (has_visit<T>::value) {
      DocWriter sub(join_path(path_, key), rows_);
      member.visit(sub);
    } else if constexpr (is_object_list<T>::value) {
      row(key, "list of objects", Json::array(), doc);
      typename T::value_type element;  // its defaults are the rows' defaults
      DocWriter sub(join_path(path_, key) + "[]", rows_);
      element.visit(sub);
    } else {
      row(key, type_name(member), Json(member), doc);
    }
  }
  void choice(const char* key, std::string& member, std::initializer_list<const char*> choices,
              const char* doc = "");
  void optional(const char* key, std::optional<int64_t>&, const char* doc = "") {
    row(key, "int", Json(), doc, "derived");
  }
  void tristate(const char* key, int&, const char* doc = "") { row(key, "bool", Json(), doc); }
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
  void row(const char* key, const std::string& type, const Json& def, const char* doc, const char* shown = nullptr);
  static std::string type_name(bool) { return "bool"; }
  static std::string type_name(int64_t) { return "int"; }
  static std::string type_name(int) { return "int"; }
  static std::string type_name(double) { return "float"; }
  static std::string type_name(const std::string&) { return "string"; }
  static std::string type_name(const std::vector<double>&) { return "list of float"; }
  static std::string type_name(const std::vector<int64_t>&) { return "list of int"; }
  static std::string type_name(const std::vector<std::string>&) { return "list of string"; }
  static std::string type_name(const Json&) { return "object"; }
  std::string path_;
  std::vector<KeyRow>* rows_;
};

}  // namespace xtrain::config
