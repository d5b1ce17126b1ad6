// The multi-scale dense masked reference (see reference.h). Pooling here is the direct segment
// mean (pad, view, sum, divide), deliberately not the fused kernels' pairwise tree.
#include "xtrain/kernels/ms_attention/reference.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <limits>

#include "xtrain/kernels/attention/dense_reference.h"
#include "xtrain/kernels/ms_attention/ms_rules.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention {

at::Tensor visibility_mask(int64_t T, int64_t window, bool causal) {
  const int64_t rows = total_rows(T);
  auto mask = at::zeros({T, rows}, at::TensorOptions().dtype(at::kBool));
  bool* m = mask.data_ptr<bool>();
  SegmentRange r[kMaxRanges];
  for (int64_t i = 0; i < T; ++i) {
    const int count = causal ? causal_ranges(i, window, r) : bidirectional_ranges(i, T, window, r);
    for (int j = 0; j < count; ++j) {
      const int64_t off = level_offset(T, r[j].level);
      for (int64_t s = r[j].begin; s < r[j].end; ++s) m[i * rows + off + s] = true;
    }
  }
  return mask;
}

at::Tensor pool_levels_reference(const at::Tensor& x) {
  const int64_t T = x.size(-2), d = x.size(-1);
  std::vector<at::Tensor> levels;
  for (int l = 0; l < num_levels(T); ++l) {
    const int64_t seg = int64_t{1} << l, rows = level_rows(T, l);
    // Zero-pad the sequence to rows·seg positions, sum each segment, divide by its true size.
    auto padded = at::constant_pad_nd(x, {0, 0, 0, rows * seg - T});
    auto shape = x.sizes().vec();
    shape.back() = d;
    shape[shape.size() - 2] = seg;
    shape.insert(shape.end() - 2, rows);
    auto sums = padded.reshape(shape).sum(-2);
    auto sizes = at::empty({rows, 1}, x.options().dtype(at::kDouble).device(at::kCPU));
    for (int64_t m = 0; m < rows; ++m) sizes.data_ptr<double>()[m] = static_cast<double>(segment_size(T, l, m));
    levels.push_back(sums / sizes.to(x.options()));
  }
  return at::cat(levels, -2);
}

at::Tensor row_log_sizes(int64_t T, const at::Tensor& like) {
  auto out = at::empty({total_rows(T)}, at::TensorOptions().dtype(at::kDouble));
  double* b = out.data_ptr<double>();
  for (int l = 0; l < num_levels(T); ++l) {
    for (int64_t m = 0; m < level_rows(T, l); ++m) b[level_offset(T, l) + m] = std::log(double(segment_size(T, l, m)));
  }
  return out.to(like.options());
}

at::Tensor ms_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::vector<int64_t>& windows, bool causal, double dropout_p, uint64_t seed) {
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), d = q.size(3);
  check_windows(NH, windows);
  const auto kp = pool_levels_reference(k), vp = pool_levels_reference(v);  // [B, NH, rows, d]
  const auto bias = row_log_sizes(T, q);
  const auto S = static_cast<int64_t>(windows.size());
  at::Tensor drop;
  if (dropout_p > 0) drop = attention::dropout_factors(B, NH, T, total_rows(T), dropout_p, seed, q);
  std::vector<at::Tensor> outs;
  for (size_t g = 0; g < windows.size(); ++g) {
    const int64_t h0 = group_begin(static_cast<int64_t>(g), NH, S);
    const int64_t per_group = group_begin(static_cast<int64_t>(g) + 1, NH, S) - h0;  // array_split sizes
    const auto hidden = visibility_mask(T, windows[g], causal).logical_not().to(q.device());
    auto scores = at::matmul(q.narrow(1, h0, per_group), kp.narrow(1, h0, per_group).transpose(-2, -1)) *
                      (1.0 / std::sqrt(static_cast<double>(d))) +
                  bias;
    auto p = at::softmax(scores.masked_fill(hidden, -std::numeric_limits<double>::infinity()), -1);
    if (dropout_p > 0) p = p * drop.narrow(1, h0, per_group);
    outs.push_back(at::matmul(p, vp.narrow(1, h0, per_group)));
  }
  return at::cat(outs, 1);
}

}  // namespace xtrain::kernels::ms_attention
