// parse_completion / parse_classify over nlohmann::json: each field's type and range checked in one
// place, with OpenAI's names and defaults.
#include "xtrain/serve/request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

namespace xtrain::serve {
namespace {

using json = nlohmann::json;

json parse_object(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw RequestError("", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw RequestError("", "the body must be a JSON object, got " + std::string(j.type_name()));
  return j;
}

int64_t integer(const json& v, const std::string& field, int64_t min) {
  if (!v.is_number_integer()) {
    throw RequestError(field, field + " must be an integer, got " + std::string(v.type_name()) + " " + v.dump());
  }
  const int64_t x = v.get<int64_t>();
  if (x < min) throw RequestError(field, field + " must be >= " + std::to_string(min) + ", got " + std::to_string(x));
  return x;
}

double number(const json& v, const std::string& field) {
  if (!v.is_number()) throw RequestError(field, field + " must be a number, got " + std::string(v.type_name()));
  return v.get<double>();
}

void read_prompt(const json& v, CompletionRequest& r) {
  if (v.is_string()) {
    r.prompt = v.get<std::string>();
  } else if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
    std::vector<int64_t> ids;
    for (const auto& t : v) ids.push_back(integer(t, "prompt", 0));
    r.prompt_ids = ids;
  } else if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    r.prompt = v[0].get<std::string>();
  } else {
    throw RequestError("prompt", "prompt must be a string (or one string in a list, or a list of token ids), got " +
                                     std::string(v.type_name()) + " (several prompts per request are not supported)");
  }
}

void read_stop(const json& v, CompletionRequest& r) {
  if (v.is_null()) return;
  if (v.is_string()) {
    r.stop = {v.get<std::string>()};
  } else if (v.is_array()) {
    for (const auto& s : v) {
      if (!s.is_string()) throw RequestError("stop", "stop must be a string or a list of strings");
      r.stop.push_back(s.get<std::string>());
    }
  } else {
    throw RequestError("stop", "stop must be a string or a list of strings, got " + std::string(v.type_name()));
  }
  if (r.stop.size() > 4) throw RequestError("stop", "stop takes at most 4 strings, got " + std::to_string(r.stop.size()));
  for (const auto& s : r.stop) {
    if (s.empty()) throw RequestError("stop", "stop strings must not be empty");
  }
}

void read_completion_field(const std::string& key, const json& v, CompletionRequest& r) {
  if (key == "prompt") {
    read_prompt(v, r);
  } else if (key == "max_tokens") {
    r.max_tokens = v.is_null() ? r.max_tokens : integer(v, key, 0);
  } else if (key == "temperature") {
    r.temperature = number(v, key);
    if (!(r.temperature >= 0 && r.temperature <= 100)) throw RequestError(key, "temperature must be in [0, 100]");
  } else if (key == "top_k") {
    r.top_k = integer(v, key, 0);
  } else if (key == "top_p") {
    r.top_p = number(v, key);
    if (!(r.top_p > 0 && r.top_p <= 1)) throw RequestError(key, "top_p must be in (0, 1], got " + v.dump());
  } else if (key == "stop") {
    read_stop(v, r);
  } else if (key == "seed") {
    r.seed = v.is_null() ? r.seed : static_cast<uint64_t>(integer(v, key, 0));
  } else if (key == "stream") {
    if (!v.is_boolean()) throw RequestError(key, "stream must be true or false, got " + v.dump());
    r.stream = v.get<bool>();
  } else if (key == "n" || key == "best_of") {
    if (integer(v, key, 1) != 1) throw RequestError(key, key + " must be 1 (one completion per request)");
  } else if (key == "model" || key == "user") {
    // Accepted: one model per server; `user` is the client's own tag.
  } else {
    r.warnings.push_back("unknown field \"" + key + "\" ignored");
  }
}

}  // namespace

CompletionRequest parse_completion(const std::string& body) {
  const json j = parse_object(body);
  CompletionRequest r;
  if (!j.contains("prompt")) throw RequestError("prompt", "prompt is required");
  for (const auto& [key, value] : j.items()) read_completion_field(key, value, r);
  return r;
}

namespace {

void flatten(const json& v, size_t depth, ClassifyRequest& r) {
  if (v.is_number()) {
    if (depth != r.shape.size()) throw RequestError("input", "input is a ragged nested list");
    r.input.push_back(v.get<double>());
    return;
  }
  if (!v.is_array() || v.empty()) throw RequestError("input", "input must be a non-empty (nested) list of numbers");
  if (depth == r.shape.size()) {
    if (!r.input.empty()) throw RequestError("input", "input is a ragged nested list");
    r.shape.push_back(static_cast<int64_t>(v.size()));
  } else if (depth > r.shape.size() || r.shape[depth] != static_cast<int64_t>(v.size())) {
    throw RequestError("input", "input is a ragged nested list");
  }
  for (const auto& x : v) flatten(x, depth + 1, r);
}

}  // namespace

ClassifyRequest parse_classify(const std::string& body) {
  const json j = parse_object(body);
  ClassifyRequest r;
  for (const auto& [key, v] : j.items()) {
    if (key == "text") {
      if (!v.is_string()) throw RequestError("text", "text must be a string, got " + std::string(v.type_name()));
      r.text = v.get<std::string>();
    } else if (key == "input") {
      flatten(v, 0, r);
    } else if (key != "model") {
      r.warnings.push_back("unknown field \"" + key + "\" ignored");
    }
  }
  if (!r.text && r.input.empty()) throw RequestError("input", "give \"text\" (a text classifier) or \"input\" (a list)");
  return r;
}

std::string error_json(const std::string& message, const std::string& field, const std::string& type) {
  json e = {{"message", message}, {"type", type}, {"param", field.empty() ? json(nullptr) : json(field)},
            {"code", nullptr}};
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

size_t complete_utf8_prefix(const std::string& text, size_t limit) {
  size_t end = std::min(limit, text.size());
  // Step back over continuation bytes to the start of the last character.
  size_t start = end;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80) --start;
  if (start == 0) return end;
  const unsigned char lead = static_cast<unsigned char>(text[start - 1]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  const size_t have = end - (start - 1);
  return need > 1 && have < need ? start - 1 : end;
}

}  // namespace xtrain::serve
