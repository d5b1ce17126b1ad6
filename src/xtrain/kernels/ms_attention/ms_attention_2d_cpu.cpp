// The 2-D multi-scale fused CPU kernel (see ms_attention_2d_cpu.h): key rows (tokens, then pooled
// levels 1..), their log(size) bias, the tile planner that turns ms_rules_2d.h into one tile per
// (level, block row, side) for each query block, and the autograd Function that permutes queries
// into strip order around the tile engine's forward and backward (fused_op.h).
#include "xtrain/kernels/ms_attention/ms_attention_2d_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/cpu/fused_op.h"
#include "xtrain/kernels/ms_attention/ms_levels_2d.h"
#include "xtrain/kernels/ms_attention/ms_rules_2d.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention {

namespace acpu = attention::cpu;

std::vector<int64_t> strip_order_2d(int64_t gh, int64_t gw, bool cls_token, int64_t strip_width) {
  const int64_t c0 = cls_token ? 1 : 0, T = gh * gw + c0;
  std::vector<int64_t> order(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) order[static_cast<size_t>(strip_position_2d(t, gh, gw, c0, strip_width))] = t;
  return order;
}

namespace {

// The key rows of a grid: tokens [0, T) (the class token's key is row 0), then levels 1.. .
Rows2d key_rows_of(int64_t gh, int64_t gw, bool cls_token) {
  const int64_t c0 = cls_token ? 1 : 0;
  Rows2d r;
  r.gh = gh;
  r.gw = gw;
  for (int l = 0; l < num_levels_2d(gh, gw); ++l) r.first.push_back(l == 0 ? c0 : c0 + level_offset_2d(gh, gw, l));
  return r;
}

int64_t key_row_count(int64_t gh, int64_t gw, bool cls_token) { return total_blocks_2d(gh, gw) + (cls_token ? 1 : 0); }

// Tiles of one query block: a slot is (level, block row, side) or the class key; each query has at
// most one range of block columns per slot, and a slot's tile spans the union of its queries' ranges.
struct Planner2d {
  Rows2d rows;
  bool cls = false;
  int levels = 1;
  int64_t NH = 1;
  std::vector<int64_t> windows;
  std::shared_ptr<const std::vector<int64_t>> order;  // kernel query position -> token

  int slots() const { return levels * static_cast<int>(rows.gh) * 2 + 1; }

  // f(slot, first key row of the slot, group, b0, b1) for each range query token `t` sees.
  template <class F>
  void visit(int64_t t, int64_t w, F&& f) const {
    const int cls_slot = slots() - 1;
    if (cls && t == 0) {  // the class query: every patch at level 0, and itself
      for (int64_t a = 0; a < rows.gh; ++a) f(static_cast<int>(a * 2), rows.row(0, a, 0), 0, int64_t{0}, rows.gw);
      f(cls_slot, int64_t{0}, levels, int64_t{0}, int64_t{1});
      return;
    }
    const int64_t p = t - (cls ? 1 : 0), gh = rows.gh, gw = rows.gw;
    for_each_level_2d(p / gw, p % gw, gh, gw, w, [&](int l, AxisSpan rs, AxisSpan cs, AxisSpan prs, AxisSpan pcs) {
      const int64_t z = int64_t{1} << l;
      const int64_t b0 = cs.s / z, b1 = up(cs.f, z) / z, pa0 = prs.s / z, pa1 = up(prs.f, z) / z;
      const int64_t pb0 = pcs.s / z, pb1 = up(pcs.f, z) / z;
      for (int64_t a = rs.s / z; a < up(rs.f, z) / z; ++a) {
        const int slot = static_cast<int>((l * gh + a) * 2);
        const int64_t base = rows.row(l, a, 0);
        if (l == 0 || a < pa0 || a >= pa1) {
          f(slot, base, l, b0, b1);
          continue;
        }
        if (pb0 > b0) f(slot, base, l, b0, pb0);
        if (b1 > pb1) f(slot + 1, base, l, pb1, b1);
      }
    });
    if (cls) f(cls_slot, int64_t{0}, levels, int64_t{0}, int64_t{1});
  }

  void operator()(int64_t bh, int64_t i0, int32_t m, acpu::TileList& out) const {
    const int64_t w = window_of_head(bh % NH, NH, windows);
    thread_local std::vector<int64_t> lo, hi;
    thread_local std::vector<int> tile_of;
    thread_local std::vector<int> touched;
    const auto S = static_cast<size_t>(slots());
    if (lo.size() < S) {
      lo.assign(S, std::numeric_limits<int64_t>::max());
      hi.assign(S, 0);
      tile_of.assign(S, -1);
    }
    touched.clear();
    const auto& ord = *order;
    for (int32_t q = 0; q < m; ++q) {
      visit(ord[static_cast<size_t>(i0 + q)], w, [&](int s, int64_t, int, int64_t b0, int64_t b1) {
        if (hi[s] == 0) touched.push_back(s);
        lo[s] = std::min(lo[s], b0);
        hi[s] = std::max(hi[s], b1);
      });
    }
    for (int32_t q = 0; q < m; ++q) {
      visit(ord[static_cast<size_t>(i0 + q)], w, [&](int s, int64_t base, int group, int64_t b0, int64_t b1) {
        if (tile_of[s] < 0) {
          tile_of[s] = static_cast<int>(out.size());
          out.add(base + lo[s], static_cast<int32_t>(hi[s] - lo[s]), group);
        }
        out.lo(tile_of[s])[q] = static_cast<int32_t>(b0 - lo[s]);
        out.hi(tile_of[s])[q] = static_cast<int32_t>(b1 - lo[s]);
      });
    }
    for (int s : touched) {
      lo[s] = std::numeric_limits<int64_t>::max();
      hi[s] = 0;
      tile_of[s] = -1;
    }
  }
};

template <typename T>
void for_each_head(at::Tensor& rows, const Rows2d& r, bool pool) {
  const int64_t BH = rows.size(0), R = rows.size(1), d = rows.size(2);
  T* base = rows.data_ptr<T>();
  at::parallel_for(0, BH, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      if (pool) {
        pool_levels_2d(base + bh * R * d, r, d);
      } else {
        unpool_grad_2d(base + bh * R * d, r, d);
      }
    }
  });
}

void pool_or_unpool(at::Tensor& rows, const Rows2d& r, bool pool) {
  if (rows.scalar_type() == at::kDouble) {
    for_each_head<double>(rows, r, pool);
  } else {
    for_each_head<float>(rows, r, pool);
  }
}

struct MultiScale2d {
  std::vector<int64_t> windows;
  int64_t gh = 1, gw = 1;
  bool cls = false;

  acpu::KeySource keys(const at::Tensor& k, const at::Tensor& v,
                       std::shared_ptr<const std::vector<int64_t>> order) const {
    acpu::KeySource s;
    const Rows2d r = key_rows_of(gh, gw, cls);
    const int64_t key_rows = key_row_count(gh, gw, cls);
    s.rows_k = acpu::rows_with_sequence(k, key_rows);
    s.rows_v = acpu::rows_with_sequence(v, key_rows);
    pool_or_unpool(s.rows_k, r, true);
    pool_or_unpool(s.rows_v, r, true);
    auto bias = at::zeros({key_rows}, s.rows_k.options().dtype(at::kDouble));
    double* b = bias.data_ptr<double>();
    const int L = num_levels_2d(gh, gw);
    for (int l = 0; l < L; ++l) {
      for (int64_t a = 0; a < level_rows(gh, l); ++a) {
        for (int64_t c = 0; c < level_rows(gw, l); ++c) b[r.row(l, a, c)] = std::log(double(block_size_2d(gh, gw, l, a, c)));
      }
    }
    s.bias = bias.to(s.rows_k.scalar_type());
    auto& p = s.problem;
    p.BH = k.size(0) * k.size(1);
    p.NH = k.size(1);
    p.n = k.size(2);
    p.d = k.size(3);
    p.key_rows = key_rows;
    p.block = kQueryBlock2d;
    p.num_groups = L + 1;  // one per level, and the class key
    p.batch_cols = 2048;   // usually every tile of a block at once: one exact softmax
    Planner2d plan;
    plan.rows = r;
    plan.cls = cls;
    plan.levels = L;
    plan.NH = p.NH;
    plan.windows = windows;
    plan.order = std::move(order);
    p.plan = plan;
    return s;
  }

  at::Tensor unpool(at::Tensor rows_grad) const {
    pool_or_unpool(rows_grad, key_rows_of(gh, gw, cls), false);
    return rows_grad;
  }
};

// Token order as an index tensor, and its inverse.
struct Order {
  std::shared_ptr<const std::vector<int64_t>> positions;
  at::Tensor to_kernel, to_tokens;  // index_select(2, to_kernel): token order -> kernel order
};

Order order_for(int64_t gh, int64_t gw, bool cls) {
  Order o;
  auto ord = std::make_shared<std::vector<int64_t>>(strip_order_2d(gh, gw, cls, kStripWidth2d));
  std::vector<int64_t> inv(ord->size());
  for (size_t i = 0; i < ord->size(); ++i) inv[static_cast<size_t>((*ord)[i])] = static_cast<int64_t>(i);
  o.to_kernel = at::tensor(*ord, at::kLong);
  o.to_tokens = at::tensor(inv, at::kLong);
  o.positions = std::move(ord);
  return o;
}

MultiScale2d load(torch::autograd::AutogradContext* ctx) {
  MultiScale2d m;
  m.windows = ctx->saved_data["windows"].toIntVector();
  m.gh = ctx->saved_data["gh"].toInt();
  m.gw = ctx->saved_data["gw"].toInt();
  m.cls = ctx->saved_data["cls"].toBool();
  return m;
}

struct MultiScale2dFunction : public torch::autograd::Function<MultiScale2dFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const MultiScale2d& kernel, double p, int64_t seed) {
    const Order o = order_for(kernel.gh, kernel.gw, kernel.cls);
    const auto keys = kernel.keys(k, v, o.positions);
    auto r = acpu::fused_forward_op(q.index_select(2, o.to_kernel), keys, p, static_cast<uint64_t>(seed));
    ctx->saved_data["windows"] = kernel.windows;
    ctx->saved_data["gh"] = kernel.gh;
    ctx->saved_data["gw"] = kernel.gw;
    ctx->saved_data["cls"] = kernel.cls;
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->save_for_backward({q, k, v, r.out, r.lse});  // out and lse in kernel order
    return r.out.index_select(2, o.to_tokens);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const MultiScale2d kernel = load(ctx);
    const Order o = order_for(kernel.gh, kernel.gw, kernel.cls);
    const int64_t B = q.size(0), T = q.size(2);
    const auto keys = kernel.keys(k, v, o.positions);
    auto r = acpu::fused_backward_op(q.index_select(2, o.to_kernel), keys, saved[3],
                                     grads[0].index_select(2, o.to_kernel), saved[4], ctx->saved_data["p"].toDouble(),
                                     static_cast<uint64_t>(ctx->saved_data["seed"].toInt()));
    return {r.dq.index_select(2, o.to_tokens), acpu::heads_grad(kernel.unpool(r.dk_rows), B, T, k.scalar_type()),
            acpu::heads_grad(kernel.unpool(r.dv_rows), B, T, v.scalar_type()), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

void check_grid_call(const at::Tensor& q, int64_t gh, int64_t gw, bool cls_token, double dropout_p) {
  const int64_t tokens = gh * gw + (cls_token ? 1 : 0);
  XTRAIN_USAGE_CHECK(gh >= 1 && gw >= 1 && q.size(2) == tokens, "attention: the 2-D grid ", gh, "x", gw,
                     cls_token ? " plus a class token" : "", " needs ", tokens, " tokens, got ", q.size(2),
                     " (xtrain.model grid / pool)");
  XTRAIN_USAGE_CHECK(dropout_p >= 0 && dropout_p < 1, "attention: dropout must be in [0, 1), got ", dropout_p,
                     " (xtrain.model.dropout)");
}

at::Tensor ms_attention_2d_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::vector<int64_t>& windows, int64_t gh, int64_t gw, bool cls_token,
                               double dropout_p, std::optional<uint64_t> seed) {
  acpu::check_fused_inputs(q, k, v, "attention (ms2d_fused_cpu)");
  check_windows(q.size(1), windows);
  check_grid_call(q, gh, gw, cls_token, dropout_p);
  MultiScale2d kernel;
  kernel.windows = windows;
  kernel.gh = gh;
  kernel.gw = gw;
  kernel.cls = cls_token;
  const uint64_t s = dropout_p > 0 ? (seed ? *seed : attention::draw_dropout_seed()) : 0;
  if (q.requires_grad() || k.requires_grad() || v.requires_grad()) {
    return MultiScale2dFunction::apply(q, k, v, kernel, dropout_p, static_cast<int64_t>(s));
  }
  const Order o = order_for(gh, gw, cls_token);
  const auto out = acpu::fused_forward_op(q.index_select(2, o.to_kernel), kernel.keys(k, v, o.positions), dropout_p, s);
  return out.out.index_select(2, o.to_tokens);
}

}  // namespace xtrain::kernels::ms_attention
