// Typed reads of environment variables, with the variable named in every error.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::env {

std::optional<std::string> get(const char* name);
std::string get_or(const char* name, const std::string& fallback);
// nullopt when unset or empty; UsageError when set but not an integer.
std::optional<int64_t> get_int(const char* name);
int64_t get_int_or(const char* name, int64_t fallback);

}  // namespace xtrain::env
