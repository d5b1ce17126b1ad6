// Multi-scale attention's key-selection rules and level arithmetic, exactly as
// shared/design/multiscale-attention.md (and its partition_check.py) state them: which pooled
// segments (level l, segments [begin, end)) query i sees, causal or bidirectional. One copy for the
// dense reference, the CPU kernel and the CUDA kernel (XTRAIN_HD; no torch headers).
// Design choice: pooled rows of all levels are numbered consecutively, level by level.
#pragma once
#include <cstdint>

#include "xtrain/kernels/attention/host_device.h"

namespace xtrain::kernels::ms_attention {

// More than any n < 2^62 needs: one range per level causal, two bidirectional.
constexpr int kMaxRanges = 128;

struct SegmentRange {
  int level;      // l: segments of 2^l positions
  int side;       // 0: the causal range / bidirectional level 0 and left side; 1: right side
  int64_t begin;  // first segment index m
  int64_t end;    // one past the last
};

XTRAIN_HD int64_t level_rows(int64_t n, int l) { return ((n - 1) >> l) + 1; }  // ceil(n / 2^l), n >= 1

// Levels 0 .. num_levels(n)-1 exist; the last one is a single segment.
XTRAIN_HD int num_levels(int64_t n) {
  int l = 0;
  while (level_rows(n, l) > 1) ++l;
  return l + 1;
}

XTRAIN_HD int64_t level_offset(int64_t n, int l) {
  int64_t off = 0;
  for (int j = 0; j < l; ++j) off += level_rows(n, j);
  return off;
}

XTRAIN_HD int64_t total_rows(int64_t n) { return level_offset(n, num_levels(n)); }

XTRAIN_HD int64_t segment_size(int64_t n, int l, int64_t m) {
  const int64_t start = m << l, full = int64_t{1} << l;
  return n - start < full ? n - start : full;
}

// down(x, a) clamped at 0 (the rules always take max(0, down(...))) and up(x, a); a is a power of
// two, so both are masks (this runs for every query of every block).
XTRAIN_HD int64_t down0(int64_t x, int64_t a) { return x <= 0 ? 0 : x & ~(a - 1); }
XTRAIN_HD int64_t up(int64_t x, int64_t a) { return (x + a - 1) & ~(a - 1); }

// Query i (0-based), window w >= 1: the causal partition of [0, i], one range per level, calling
// f(SegmentRange) for each (no storage: the CUDA kernels walk it per query).
template <class F>
XTRAIN_HD void for_each_causal_range(int64_t i, int64_t w, F&& f) {
  int64_t e = i + 1;
  for (int l = 0;; ++l) {
    const int64_t s = down0(e - (w << l), int64_t{2} << l);
    f(SegmentRange{l, 0, s >> l, e >> l});
    if (s == 0) return;
    e = s;
  }
}

// Query i of n, window w >= 1: the bidirectional partition of [0, n). Empty ranges are left out.
template <class F>
XTRAIN_HD void for_each_bidirectional_range(int64_t i, int64_t n, int64_t w, F&& f) {
  int64_t s = down0(i - w / 2, 2);
  int64_t f_end = up(i + 1 + (w + 1) / 2, 2);
  if (f_end > n) f_end = n;
  f(SegmentRange{0, 0, s, f_end});
  for (int l = 1; s > 0 || f_end < n; ++l) {
    const int64_t ns = down0(s - (w / 2 << l), int64_t{2} << l);
    int64_t nf = up(f_end + (w / 2 << l), int64_t{2} << l);
    if (nf > n) nf = n;
    if (ns < s) f(SegmentRange{l, 0, ns >> l, s >> l});
    if (f_end < n && nf > f_end) f(SegmentRange{l, 1, f_end >> l, ((nf - 1) >> l) + 1});
    s = ns;
    f_end = nf;
  }
}

// The same ranges stored in out[] (at most kMaxRanges); returns their number.
XTRAIN_HD int causal_ranges(int64_t i, int64_t w, SegmentRange* out) {
  int count = 0;
  for_each_causal_range(i, w, [&](const SegmentRange& r) { out[count++] = r; });
  return count;
}

XTRAIN_HD int bidirectional_ranges(int64_t i, int64_t n, int64_t w, SegmentRange* out) {
  int count = 0;
  for_each_bidirectional_range(i, n, w, [&](const SegmentRange& r) { out[count++] = r; });
  return count;
}

}  // namespace xtrain::kernels::ms_attention
