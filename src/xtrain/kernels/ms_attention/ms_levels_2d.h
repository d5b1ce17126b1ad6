// The pooled 2^l x 2^l block levels of 2-D multi-scale attention on one head's raw row array, and
// the gradient back through them. Design choice: level l is built from level l-1 as the
// size-weighted mean of its (up to four) child blocks, O(n·d) in all; the backward pushes each
// level's gradient down the same tree, top level first. Torch-free templates for the CPU kernel.
// Row layout (Rows2d): level 0 block (a, b) is row first[0] + a·gw + b (the patch tokens), level
// l >= 1 block (a, b) is row first[l] + a·ceil(gw/2^l) + b.
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/kernels/ms_attention/ms_rules_2d.h"

namespace xtrain::kernels::ms_attention {

struct Rows2d {
  int64_t gh = 1, gw = 1;
  std::vector<int64_t> first;  // per level: the row of block (0, 0)
  int64_t row(int l, int64_t a, int64_t b) const { return first[l] + a * level_rows(gw, l) + b; }
};

// y[j] += s * x[j] for j < d (the -O2 vectoriser takes the fixed 16-wide blocks).
template <typename T>
inline void axpy_row(T* __restrict y, const T* __restrict x, T s, int64_t d) {
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    for (int u = 0; u < 16; ++u) y[j + u] += s * x[j + u];
  }
  for (; j < d; ++j) y[j] += s * x[j];
}

// Calls f(child_a, child_b, weight) for the children (level l-1) of block (a, b) of level l >= 1,
// weight = child size / block size.
template <class F>
inline void for_each_child_2d(const Rows2d& r, int l, int64_t a, int64_t b, F&& f) {
  const int64_t nr = level_rows(r.gh, l - 1), nc = level_rows(r.gw, l - 1);
  const double size = static_cast<double>(block_size_2d(r.gh, r.gw, l, a, b));
  for (int64_t ca = 2 * a; ca < 2 * a + 2 && ca < nr; ++ca) {
    for (int64_t cb = 2 * b; cb < 2 * b + 2 && cb < nc; ++cb) {
      f(ca, cb, static_cast<double>(block_size_2d(r.gh, r.gw, l - 1, ca, cb)) / size);
    }
  }
}

// base: [rows][d] with level 0 filled; writes levels 1.. .
template <typename T>
void pool_levels_2d(T* base, const Rows2d& r, int64_t d) {
  const int L = num_levels_2d(r.gh, r.gw);
  for (int l = 1; l < L; ++l) {
    for (int64_t a = 0; a < level_rows(r.gh, l); ++a) {
      for (int64_t b = 0; b < level_rows(r.gw, l); ++b) {
        T* out = base + r.row(l, a, b) * d;
        for (int64_t j = 0; j < d; ++j) out[j] = T(0);
        for_each_child_2d(r, l, a, b, [&](int64_t ca, int64_t cb, double wgt) {
          axpy_row(out, base + r.row(l - 1, ca, cb) * d, static_cast<T>(wgt), d);
        });
      }
    }
  }
}

// base: [rows][d] gradients of every level's rows; adds levels 1.. into level 0 (in place).
template <typename T>
void unpool_grad_2d(T* base, const Rows2d& r, int64_t d) {
  for (int l = num_levels_2d(r.gh, r.gw) - 1; l >= 1; --l) {
    for (int64_t a = 0; a < level_rows(r.gh, l); ++a) {
      for (int64_t b = 0; b < level_rows(r.gw, l); ++b) {
        const T* g = base + r.row(l, a, b) * d;
        for_each_child_2d(r, l, a, b, [&](int64_t ca, int64_t cb, double wgt) {
          axpy_row(base + r.row(l - 1, ca, cb) * d, g, static_cast<T>(wgt), d);
        });
      }
    }
  }
}

}  // namespace xtrain::kernels::ms_attention
