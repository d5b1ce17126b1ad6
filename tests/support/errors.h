// The message of the UsageError a call throws, for tests of error texts.
#pragma once
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

}  // namespace xtrain::testing
