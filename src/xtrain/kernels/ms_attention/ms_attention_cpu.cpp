// The multi-scale fused CPU kernel (see ms_attention_cpu.h): pooled key rows and their log(size)
// bias, and the tile planner that turns the key-selection rules (ms_rules.h) into one tile per
// (level, side) for each query block. The tile engine and fused_op.h do the rest.
#include "xtrain/kernels/ms_attention/ms_attention_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/cpu/fused_op.h"
#include "xtrain/kernels/ms_attention/ms_levels.h"
#include "xtrain/kernels/ms_attention/ms_rules.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention {

namespace acpu = attention::cpu;

int64_t ms_block_size(int64_t) { return 32; }

namespace {

int ranges_of(bool causal, int64_t i, int64_t n, int64_t w, SegmentRange* out) {
  return causal ? causal_ranges(i, w, out) : bidirectional_ranges(i, n, w, out);
}

// Tiles for queries [i0, i0 + m) with window w: one per (level, side) slot, spanning the union of
// the block's ranges in that slot; each query's own range is its [lo, hi) inside the tile.
void plan_block(bool causal, int64_t n, int64_t w, const std::vector<int64_t>& offsets, int64_t i0, int32_t m,
                acpu::TileList& out) {
  const int slots = 2 * static_cast<int>(offsets.size());
  std::vector<int64_t> lo(slots, std::numeric_limits<int64_t>::max()), hi(slots, 0);
  std::vector<int> tile_of(slots, -1);
  SegmentRange r[kMaxRanges];
  for (int32_t q = 0; q < m; ++q) {
    const int count = ranges_of(causal, i0 + q, n, w, r);
    for (int j = 0; j < count; ++j) {
      const int s = 2 * r[j].level + r[j].side;
      lo[s] = std::min(lo[s], r[j].begin);
      hi[s] = std::max(hi[s], r[j].end);
    }
  }
  for (int s = 0; s < slots; ++s) {
    if (hi[s] <= lo[s]) continue;
    tile_of[s] = static_cast<int>(out.size());
    out.add(offsets[s / 2] + lo[s], static_cast<int32_t>(hi[s] - lo[s]), s / 2);
  }
  for (int32_t q = 0; q < m; ++q) {
    const int count = ranges_of(causal, i0 + q, n, w, r);
    for (int j = 0; j < count; ++j) {
      const int s = 2 * r[j].level + r[j].side;
      out.lo(tile_of[s])[q] = static_cast<int32_t>(r[j].begin - lo[s]);
      out.hi(tile_of[s])[q] = static_cast<int32_t>(r[j].end - lo[s]);
    }
  }
}

template <typename T>
void pool_all(at::Tensor& rows, int64_t n) {
  const int64_t BH = rows.size(0), R = rows.size(1), d = rows.size(2);
  T* base = rows.data_ptr<T>();
  at::parallel_for(0, BH, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) pool_levels(base + bh * R * d, n, d);
  });
}

template <typename T>
void unpool_all(at::Tensor& rows, int64_t n) {
  const int64_t BH = rows.size(0), R = rows.size(1), d = rows.size(2);
  T* base = rows.data_ptr<T>();
  at::parallel_for(0, BH, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) unpool_grad(base + bh * R * d, n, d);
  });
}

// [B, NH, n, d] -> [B·NH, total_rows(n), d]: level 0 is the sequence, then the pooled levels.
at::Tensor pooled_rows(const at::Tensor& x) {
  const int64_t n = x.size(2);
  auto rows = acpu::rows_with_sequence(x, total_rows(n));
  if (rows.scalar_type() == at::kDouble) {
    pool_all<double>(rows, n);
  } else {
    pool_all<float>(rows, n);
  }
  return rows;
}

struct MultiScale {
  std::vector<int64_t> windows;
  bool causal = true;

  acpu::KeySource keys(const at::Tensor& k, const at::Tensor& v) const {
    acpu::KeySource s;
    const int64_t n = k.size(2), NH = k.size(1);
    s.rows_k = pooled_rows(k);
    s.rows_v = pooled_rows(v);
    const int L = num_levels(n);
    std::vector<int64_t> offsets(L);
    auto bias = at::empty({total_rows(n)}, s.rows_k.options().dtype(at::kDouble));
    double* b = bias.data_ptr<double>();
    for (int l = 0; l < L; ++l) {
      offsets[l] = level_offset(n, l);
      for (int64_t m = 0; m < level_rows(n, l); ++m) b[offsets[l] + m] = std::log(double(segment_size(n, l, m)));
    }
    s.bias = bias.to(s.rows_k.scalar_type());
    auto& p = s.problem;
    p.BH = k.size(0) * NH;
    p.NH = NH;
    p.n = n;
    p.d = k.size(3);
    p.key_rows = total_rows(n);
    p.block = ms_block_size(*std::min_element(windows.begin(), windows.end()));
    p.num_groups = L;
    p.batch_cols = 2048;  // usually every tile of a block at once: one exact softmax
    const auto ws = windows;
    const bool is_causal = causal;
    p.plan = [ws, is_causal, n, NH, offsets](int64_t bh, int64_t i0, int32_t m, acpu::TileList& out) {
      plan_block(is_causal, n, window_of_head(bh % NH, NH, ws), offsets, i0, m, out);
    };
    return s;
  }

  at::Tensor unpool(const at::Tensor& rows_grad, int64_t n) const {
    auto rows = rows_grad;
    if (rows.scalar_type() == at::kDouble) {
      unpool_all<double>(rows, n);
    } else {
      unpool_all<float>(rows, n);
    }
    return rows;
  }

  void save(torch::autograd::AutogradContext* ctx) const {
    ctx->saved_data["windows"] = windows;
    ctx->saved_data["causal"] = causal;
  }
  static MultiScale load(torch::autograd::AutogradContext* ctx) {
    MultiScale m;
    m.windows = ctx->saved_data["windows"].toIntVector();
    m.causal = ctx->saved_data["causal"].toBool();
    return m;
  }
};

}  // namespace

at::Tensor ms_attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::vector<int64_t>& windows, bool causal, double dropout_p,
                            std::optional<uint64_t> seed) {
  acpu::check_fused_inputs(q, k, v, "attention (ms_fused_cpu)");
  check_windows(q.size(1), windows);
  XTRAIN_USAGE_CHECK(dropout_p >= 0 && dropout_p < 1, "attention: dropout must be in [0, 1), got ", dropout_p,
                     " (xtrain.model.dropout)");
  MultiScale kernel;
  kernel.windows = windows;
  kernel.causal = causal;
  return acpu::run_fused(kernel, q, k, v, dropout_p, seed);
}

}  // namespace xtrain::kernels::ms_attention
