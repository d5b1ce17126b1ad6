// The 2-D multi-scale dense masked reference (see reference_2d.h). Pooling is the direct block mean
// (pad the grid, view as blocks, sum, divide by the true sizes), not a fused kernel's pairwise tree.
#include "xtrain/kernels/ms_attention/reference_2d.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/kernels/ms_attention/ms_rules_2d.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention {

namespace {

// Marks, in row `m` of the mask, the blocks the patch query (r, c) sees.
void mark_patch_query(bool* m, int64_t r, int64_t c, int64_t gh, int64_t gw, int64_t w) {
  for_each_level_2d(r, c, gh, gw, w, [&](int l, AxisSpan rows, AxisSpan cols, AxisSpan prows, AxisSpan pcols) {
    const int64_t z = int64_t{1} << l, off = level_offset_2d(gh, gw, l), nb = level_rows(gw, l);
    for (int64_t a = rows.s / z; a < up(rows.f, z) / z; ++a) {
      for (int64_t b = cols.s / z; b < up(cols.f, z) / z; ++b) {
        if (l > 0 && block_in_span(a, l, gh, prows) && block_in_span(b, l, gw, pcols)) continue;
        m[off + a * nb + b] = true;
      }
    }
  });
}

}  // namespace

at::Tensor visibility_mask_2d(int64_t gh, int64_t gw, int64_t window, bool cls_token) {
  XTRAIN_USAGE_CHECK(gh >= 1 && gw >= 1, "attention: the 2-D grid must be at least 1x1, got ", gh, "x", gw,
                     " (xtrain.model grid)");
  const int64_t n = gh * gw, blocks = total_blocks_2d(gh, gw), c0 = cls_token ? 1 : 0;
  const int64_t T = n + c0, K = blocks + c0;
  auto mask = at::zeros({T, K}, at::TensorOptions().dtype(at::kBool));
  bool* m = mask.data_ptr<bool>();
  if (cls_token) {
    for (int64_t p = 0; p < n; ++p) m[p] = true;  // the class query: every patch at level 0 ...
    m[blocks] = true;                              // ... and itself
  }
  for (int64_t p = 0; p < n; ++p) {
    bool* row = m + (p + c0) * K;
    mark_patch_query(row, p / gw, p % gw, gh, gw, window);
    if (cls_token) row[blocks] = true;  // every patch query sees the class token (size 1)
  }
  return mask;
}

at::Tensor pool_levels_2d_reference(const at::Tensor& x, int64_t gh, int64_t gw) {
  const int64_t d = x.size(-1);
  auto lead = x.sizes().vec();
  lead.resize(lead.size() - 2);
  auto grid_shape = lead;
  grid_shape.insert(grid_shape.end(), {gh, gw, d});
  const auto grid = x.reshape(grid_shape);
  std::vector<at::Tensor> levels;
  for (int l = 0; l < num_levels_2d(gh, gw); ++l) {
    const int64_t z = int64_t{1} << l, nr = level_rows(gh, l), nc = level_rows(gw, l);
    // Zero-pad to nr·z x nc·z, view as [nr, z, nc, z, d], sum the two z axes, divide by true sizes.
    auto padded = at::constant_pad_nd(grid, {0, 0, 0, nc * z - gw, 0, nr * z - gh});
    auto shape = lead;
    shape.insert(shape.end(), {nr, z, nc, z, d});
    const auto dims = static_cast<int64_t>(lead.size());
    auto sums = padded.reshape(shape).sum({dims + 1, dims + 3});  // [..., nr, nc, d]
    auto sizes = at::empty({nr, nc, 1}, at::TensorOptions().dtype(at::kDouble));
    for (int64_t a = 0; a < nr; ++a) {
      for (int64_t b = 0; b < nc; ++b) sizes.data_ptr<double>()[a * nc + b] = double(block_size_2d(gh, gw, l, a, b));
    }
    auto means = sums / sizes.to(x.options());
    auto flat = lead;
    flat.insert(flat.end(), {nr * nc, d});
    levels.push_back(means.reshape(flat));
  }
  return at::cat(levels, -2);
}

at::Tensor key_log_sizes_2d(int64_t gh, int64_t gw, bool cls_token, const at::Tensor& like) {
  const int64_t blocks = total_blocks_2d(gh, gw);
  auto out = at::zeros({blocks + (cls_token ? 1 : 0)}, at::TensorOptions().dtype(at::kDouble));
  double* b = out.data_ptr<double>();
  for (int l = 0; l < num_levels_2d(gh, gw); ++l) {
    const int64_t nr = level_rows(gh, l), nc = level_rows(gw, l), off = level_offset_2d(gh, gw, l);
    for (int64_t a = 0; a < nr; ++a) {
      for (int64_t c = 0; c < nc; ++c) b[off + a * nc + c] = std::log(double(block_size_2d(gh, gw, l, a, c)));
    }
  }
  return out.to(like.options());
}

at::Tensor ms_attention_2d_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const std::vector<int64_t>& windows, int64_t gh, int64_t gw,
                                     bool cls_token) {
  const int64_t NH = q.size(1), T = q.size(2), d = q.size(3), c0 = cls_token ? 1 : 0;
  check_windows(NH, windows);
  XTRAIN_USAGE_CHECK(gh >= 1 && gw >= 1 && T == gh * gw + c0, "attention: the 2-D grid ", gh, "x", gw,
                     cls_token ? " plus a class token" : "", " needs ", gh * gw + c0, " tokens, got ", T,
                     " (xtrain.model grid / pool)");
  auto patches = [&](const at::Tensor& x) { return x.narrow(2, c0, T - c0); };
  auto kp = pool_levels_2d_reference(patches(k), gh, gw), vp = pool_levels_2d_reference(patches(v), gh, gw);
  if (cls_token) {
    kp = at::cat({kp, k.narrow(2, 0, 1)}, 2);
    vp = at::cat({vp, v.narrow(2, 0, 1)}, 2);
  }
  const auto bias = key_log_sizes_2d(gh, gw, cls_token, q);
  const auto S = static_cast<int64_t>(windows.size());
  std::vector<at::Tensor> outs;
  for (size_t g = 0; g < windows.size(); ++g) {
    const int64_t h0 = group_begin(static_cast<int64_t>(g), NH, S);
    const int64_t heads = group_begin(static_cast<int64_t>(g) + 1, NH, S) - h0;
    const auto hidden = visibility_mask_2d(gh, gw, windows[g], cls_token).logical_not().to(q.device());
    auto scores = at::matmul(q.narrow(1, h0, heads), kp.narrow(1, h0, heads).transpose(-2, -1)) *
                      (1.0 / std::sqrt(static_cast<double>(d))) +
                  bias;
    auto p = at::softmax(scores.masked_fill(hidden, -std::numeric_limits<double>::infinity()), -1);
    outs.push_back(at::matmul(p, vp.narrow(1, h0, heads)));
  }
  return at::cat(outs, 1);
}

}  // namespace xtrain::kernels::ms_attention
