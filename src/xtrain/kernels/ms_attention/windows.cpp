// check_windows (see windows.h).
#include "xtrain/kernels/ms_attention/windows.h"

#include <sstream>

#include "xtrain/base/error.h"

namespace xtrain::kernels::ms_attention {

namespace {
std::string list(const std::vector<int64_t>& windows) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < windows.size(); ++i) s << (i ? ", " : "") << windows[i];
  s << "]";
  return s.str();
}
}  // namespace

void check_windows(int64_t NH, const std::vector<int64_t>& windows) {
  XTRAIN_USAGE_CHECK(!windows.empty(), "attention: multiscale needs at least one window, got [] ",
                     "(xtrain.model.attention.windows)");
  for (size_t i = 0; i < windows.size(); ++i) {
    XTRAIN_USAGE_CHECK(windows[i] >= 1, "attention: every window must be >= 1, got windows[", i, "] = ", windows[i],
                       " in ", list(windows), " (xtrain.model.attention.windows)");
  }
  const auto S = static_cast<int64_t>(windows.size());
  XTRAIN_USAGE_CHECK(NH >= S, "attention: heads (", NH, ") must be at least the number of windows (", S, " in ",
                     list(windows), "): every window needs a head; raise xtrain.model.heads or list fewer ",
                     "xtrain.model.attention.windows");
}

}  // namespace xtrain::kernels::ms_attention
