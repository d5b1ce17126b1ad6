#include "xtrain/base/env.h"

#include <cstdlib>

#include "xtrain/base/error.h"

namespace xtrain::env {

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string get_or(const char* name, const std::string& fallback) {
  auto value = get(name);
  return value ? *value : fallback;
}

std::optional<int64_t> get_int(const char* name) {
  auto value = get(name);
  if (!value) return std::nullopt;
  char* end = nullptr;
  const long long parsed = std::strtoll(value->c_str(), &end, 10);
  XTRAIN_USAGE_CHECK(end != nullptr && *end == '\0', "environment variable ", name,
                     " must be an integer, got '", *value, "'");
  return static_cast<int64_t>(parsed);
}

int64_t get_int_or(const char* name, int64_t fallback) {
  auto value = get_int(name);
  return value ? *value : fallback;
}

}  // namespace xtrain::env
