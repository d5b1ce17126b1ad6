// The 2-D (image patch grid) key-selection rule of docs/design/multiscale-attention-2d.md: the 1-D
// bidirectional rule applied to rows and columns separately, giving per level l a rectangle
// R(l) = [s_r, f_r) x [s_c, f_c) of patches; the query sees the level-l blocks inside R(l) and not
// inside R(l-1). Header-only and XTRAIN_HD (no torch headers) so the reference, the CPU kernel and
// the CUDA kernel share one copy. Pooled rows of all levels are numbered level by level, row-major
// within a level.
#pragma once
#include <cstdint>

#include "xtrain/kernels/attention/host_device.h"
#include "xtrain/kernels/ms_attention/ms_rules.h"

namespace xtrain::kernels::ms_attention {

// Levels 0 .. num_levels_2d-1 exist; the last one is a single block covering the grid.
XTRAIN_HD int num_levels_2d(int64_t gh, int64_t gw) { return num_levels(gh > gw ? gh : gw); }

// Blocks of level l: ceil(gh / 2^l) * ceil(gw / 2^l).
XTRAIN_HD int64_t level_blocks_2d(int64_t gh, int64_t gw, int l) { return level_rows(gh, l) * level_rows(gw, l); }

XTRAIN_HD int64_t level_offset_2d(int64_t gh, int64_t gw, int l) {
  int64_t off = 0;
  for (int j = 0; j < l; ++j) off += level_blocks_2d(gh, gw, j);
  return off;
}

XTRAIN_HD int64_t total_blocks_2d(int64_t gh, int64_t gw) { return level_offset_2d(gh, gw, num_levels_2d(gh, gw)); }

// Patches in block (a, b) of level l (cut at the grid's edge).
XTRAIN_HD int64_t block_size_2d(int64_t gh, int64_t gw, int l, int64_t a, int64_t b) {
  return segment_size(gh, l, a) * segment_size(gw, l, b);
}

// One axis of the rectangle: [s, f) at level 0 for position i on an axis of length n, window w.
struct AxisSpan {
  int64_t s, f;
};

XTRAIN_HD AxisSpan axis_span0(int64_t i, int64_t n, int64_t w) {
  const int64_t f = up(i + 1 + (w + 1) / 2, 2);
  return AxisSpan{down0(i - w / 2, 2), f < n ? f : n};
}

// The level-l span from the level-(l-1) one (l >= 1); a span that reached [0, n) stays there.
XTRAIN_HD AxisSpan axis_span_next(AxisSpan p, int64_t n, int64_t w, int l) {
  const int64_t f = up(p.f + (w / 2) * (int64_t{1} << l), int64_t{2} << l);
  return AxisSpan{down0(p.s - (w / 2) * (int64_t{1} << l), int64_t{2} << l), f < n ? f : n};
}

// Block index a of level l (blocks of 2^l) lies wholly inside span p of an axis of length n.
XTRAIN_HD bool block_in_span(int64_t a, int l, int64_t n, AxisSpan p) {
  const int64_t lo = a << l, hi = ((a + 1) << l) < n ? ((a + 1) << l) : n;
  return p.s <= lo && hi <= p.f;
}

// Calls f(l, rows, cols, prev_rows, prev_cols) for each level the query at patch (r, c) uses, l = 0
// first (prev_* equal the current spans at l = 0), stopping after the first level whose rectangle
// is the whole grid. The caller visits blocks (a, b) of level l with a in [rows.s >> l,
// ceil(rows.f / 2^l)), b likewise, skipping those inside prev_* when l >= 1.
template <class F>
XTRAIN_HD void for_each_level_2d(int64_t r, int64_t c, int64_t gh, int64_t gw, int64_t w, F&& f) {
  AxisSpan rows = axis_span0(r, gh, w), cols = axis_span0(c, gw, w);
  f(0, rows, cols, rows, cols);
  for (int l = 1; !(rows.s == 0 && rows.f == gh && cols.s == 0 && cols.f == gw); ++l) {
    const AxisSpan nr = axis_span_next(rows, gh, w, l), nc = axis_span_next(cols, gw, w, l);
    f(l, nr, nc, rows, cols);
    rows = nr;
    cols = nc;
  }
}

// The fused kernels' query order (their dropout hash counts queries in it): strips of sw columns
// left to right, row-major inside a strip, the class token (token 0, if any) last. Returns the
// position of token t of a grid with c0 = 1 (class token) or 0.
XTRAIN_HD int64_t strip_position_2d(int64_t t, int64_t gh, int64_t gw, int64_t c0, int64_t sw) {
  if (c0 == 1 && t == 0) return gh * gw;
  const int64_t p = t - c0, r = p / gw, c = p % gw, s0 = c / sw * sw;
  const int64_t width = gw - s0 < sw ? gw - s0 : sw;
  return s0 * gh + r * width + (c - s0);
}

}  // namespace xtrain::kernels::ms_attention
