// The pooled levels of multi-scale attention on raw row arrays, and the gradient back through
// them: K(l)_m = mean of K_t over segment (l, m). Design choice: level l is built from level l-1
// as a size-weighted mean of two children (one pass over the rows per level, O(n·d) in all); the
// backward divides each level's gradient by its segment size and pushes it down the same tree.
// Torch-free templates (float, double) for the CPU kernel; ms_rules.h numbers the rows.
#pragma once
#include <cstdint>

#include "xtrain/kernels/ms_attention/ms_rules.h"

namespace xtrain::kernels::ms_attention {

// out[j] = wa * a[j] + wb * b[j] for j < d (out is neither a nor b). Blocks of 16 with a fixed trip
// count and restrict pointers, so that -O2's cheap vectoriser takes them.
template <typename T>
inline void weighted_sum(T* __restrict out, const T* a, T wa, const T* b, T wb, int64_t d) {
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    for (int u = 0; u < 16; ++u) out[j + u] = wa * a[j + u] + wb * b[j + u];
  }
  for (; j < d; ++j) out[j] = wa * a[j] + wb * b[j];
}

// g[j] = g[j] * scale + add[j] (add may be null: 0).
template <typename T>
inline void scale_add(T* __restrict g, T scale, const T* __restrict add, int64_t d) {
  int64_t j = 0;
  if (add == nullptr) {
    for (; j + 16 <= d; j += 16) {
      for (int u = 0; u < 16; ++u) g[j + u] *= scale;
    }
    for (; j < d; ++j) g[j] *= scale;
    return;
  }
  for (; j + 16 <= d; j += 16) {
    for (int u = 0; u < 16; ++u) g[j + u] = g[j + u] * scale + add[j + u];
  }
  for (; j < d; ++j) g[j] = g[j] * scale + add[j];
}

// rows: [total_rows(n)][d] with level 0 (rows 0..n-1) filled; fills every other level.
template <typename T>
void pool_levels(T* rows, int64_t n, int64_t d) {
  const int L = num_levels(n);
  for (int l = 1; l < L; ++l) {
    const T* prev = rows + level_offset(n, l - 1) * d;
    T* cur = rows + level_offset(n, l) * d;
    const int64_t prev_rows = level_rows(n, l - 1);
    for (int64_t m = 0; m < level_rows(n, l); ++m) {
      const T* a = prev + 2 * m * d;
      T* out = cur + m * d;
      if (2 * m + 1 >= prev_rows) {
        weighted_sum(out, a, T(1), a, T(0), d);
        continue;
      }
      const T sa = static_cast<T>(segment_size(n, l - 1, 2 * m));
      const T sb = static_cast<T>(segment_size(n, l - 1, 2 * m + 1));
      weighted_sum(out, a, sa / (sa + sb), a + d, sb / (sa + sb), d);
    }
  }
}

// rows: [total_rows(n)][d], the gradient w.r.t. every pooled row. On return rows 0..n-1 hold the
// gradient w.r.t. the sequence (dK_t = sum over levels of dK(l)_m(t) / size(l, m(t))); the other
// rows are overwritten.
template <typename T>
void unpool_grad(T* rows, int64_t n, int64_t d) {
  const int L = num_levels(n);
  for (int l = L - 1; l >= 0; --l) {
    T* cur = rows + level_offset(n, l) * d;
    const T* parent = l + 1 < L ? rows + level_offset(n, l + 1) * d : nullptr;
    for (int64_t m = 0; m < level_rows(n, l); ++m) {
      T* g = cur + m * d;
      const T inv = T(1) / static_cast<T>(segment_size(n, l, m));
      scale_add(g, inv, parent == nullptr ? nullptr : parent + (m / 2) * d, d);
    }
  }
}

}  // namespace xtrain::kernels::ms_attention
