// Multi-scale attention's window arguments: the NH heads are split into S = len(windows)
// consecutive groups as evenly as possible (numpy's array_split: the first NH mod S groups get one
// head more) and group s uses windows[s]. One check and one head -> group rule, shared by the module,
// the reference, the ONNX export and every kernel (XTRAIN_HD: the CUDA kernel calls the same
// functions), so a bad value is reported the same way everywhere (naming the config key).
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/kernels/attention/host_device.h"

namespace xtrain::kernels::ms_attention {

// UsageError unless windows is non-empty, every window >= 1 and NH >= windows.size() (a window
// with no head is an error, as the design page says).
void check_windows(int64_t NH, const std::vector<int64_t>& windows);

// The first head of group s (0 <= s <= S; group_begin(S) = NH), NH >= S >= 1.
XTRAIN_HD int64_t group_begin(int64_t s, int64_t NH, int64_t S) {
  const int64_t base = NH / S, extra = NH % S;
  return s * base + (s < extra ? s : extra);
}

// The group of head h (0 <= h < NH), NH >= S >= 1.
XTRAIN_HD int64_t group_of_head(int64_t h, int64_t NH, int64_t S) {
  const int64_t base = NH / S, extra = NH % S, wide = extra * (base + 1);  // heads in the bigger groups
  return h < wide ? h / (base + 1) : extra + (h - wide) / base;
}

// The window of head h (0 <= h < NH).
inline int64_t window_of_head(int64_t h, int64_t NH, const std::vector<int64_t>& windows) {
  return windows[static_cast<size_t>(group_of_head(h, NH, static_cast<int64_t>(windows.size())))];
}

}  // namespace xtrain::kernels::ms_attention
