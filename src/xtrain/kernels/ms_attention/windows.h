// Multi-scale attention's window arguments: the heads are split into len(windows) equal,
// consecutive groups and group s uses windows[s]. One check, shared by the module, the reference
// and every kernel, so a bad value is reported the same way everywhere (naming the config key).
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::kernels::ms_attention {

// UsageError unless windows is non-empty, every window >= 1 and NH is a multiple of its size.
void check_windows(int64_t NH, const std::vector<int64_t>& windows);

// The window of head h (0 <= h < NH).
inline int64_t window_of_head(int64_t h, int64_t NH, const std::vector<int64_t>& windows) {
  const int64_t per_group = NH / static_cast<int64_t>(windows.size());
  return windows[static_cast<size_t>(h / per_group)];
}

}  // namespace xtrain::kernels::ms_attention
