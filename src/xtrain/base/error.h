// User-facing errors. A UsageError is the user's to fix (bad config, bad flag, missing file): the
// CLI prints its message without a stack trace and exits 2. Everything else (c10::Error from
// TORCH_CHECK, std::exception) is a failure while running: exit 1. Broken invariants use
// TORCH_INTERNAL_ASSERT.
#pragma once
#include <c10/util/StringUtil.h>

#include <stdexcept>
#include <string>

namespace xtrain {

class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace xtrain

// XTRAIN_USAGE_CHECK(cond, "config: ", key, " must be > 0, got ", v): throws UsageError.
#define XTRAIN_USAGE_CHECK(cond, ...)                                 \
  do {                                                                \
    if (!(cond)) throw ::xtrain::UsageError(::c10::str(__VA_ARGS__)); \
  } while (0)

#define XTRAIN_USAGE_ERROR(...) throw ::xtrain::UsageError(::c10::str(__VA_ARGS__))
