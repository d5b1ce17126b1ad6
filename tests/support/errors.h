// The message of the UsageError a call throws, for tests of error texts.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "xtrain/base/error.h"

namespace xtrain::testing {

// e.what() of the UsageError `f` throws; "<no error>" when it returns (other exceptions propagate).
inline std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

// As usage_error, but a test failure (and "") when `f` throws none.
inline std::string expect_usage_error(const std::function<void()>& f) {
  const std::string message = usage_error(f);
  if (message != "<no error>") return message;
  ADD_FAILURE() << "no UsageError";
  return "";
}

}  // namespace xtrain::testing
