// The dense flash-style CPU kernel (see flash_cpu.h): a tile planner of 64-query blocks against
// 64-key tiles, skipping the tiles above the diagonal when causal; everything else is the shared
// tile engine and fused_op.h.
#include "xtrain/kernels/attention/flash_cpu.h"

#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/cpu/fused_op.h"

namespace xtrain::kernels::attention {

namespace {

struct DenseFlash {
  bool causal = true;
  static constexpr int64_t kBlockQ = 64, kBlockK = 64;

  cpu::KeySource keys(const at::Tensor& k, const at::Tensor& v) const {
    cpu::KeySource s;
    s.rows_k = cpu::heads_work(k);
    s.rows_v = cpu::heads_work(v);
    auto& p = s.problem;
    p.BH = k.size(0) * k.size(1);
    p.NH = k.size(1);
    p.n = k.size(2);
    p.d = k.size(3);
    p.key_rows = p.n;
    p.block = kBlockQ;
    p.num_groups = 1;
    p.batch_cols = 4 * kBlockK;  // online softmax update every 4 key tiles
    const bool is_causal = causal;
    const int64_t T = p.n;
    p.plan = [is_causal, T](int64_t, int64_t i0, int32_t m, cpu::TileList& out) {
      const int64_t limit = is_causal ? i0 + m : T;
      for (int64_t j0 = 0; j0 < limit; j0 += kBlockK) {
        const auto rows = static_cast<int32_t>(std::min(kBlockK, limit - j0));
        out.add(j0, rows, 0);
        int32_t* lo = out.lo(out.size() - 1);
        int32_t* hi = out.hi(out.size() - 1);
        for (int32_t q = 0; q < m; ++q) {
          lo[q] = 0;
          hi[q] = is_causal ? static_cast<int32_t>(std::clamp<int64_t>(i0 + q + 1 - j0, 0, rows)) : rows;
        }
      }
    };
    return s;
  }

  at::Tensor unpool(const at::Tensor& rows_grad, int64_t) const { return rows_grad; }
  void save(torch::autograd::AutogradContext* ctx) const { ctx->saved_data["causal"] = causal; }
  static DenseFlash load(torch::autograd::AutogradContext* ctx) {
    DenseFlash f;
    f.causal = ctx->saved_data["causal"].toBool();
    return f;
  }
};

}  // namespace

at::Tensor flash_attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                               double dropout_p, std::optional<uint64_t> seed) {
  cpu::check_fused_inputs(q, k, v, "attention (dense_flash_cpu)");
  XTRAIN_USAGE_CHECK(dropout_p >= 0 && dropout_p < 1, "attention: dropout must be in [0, 1), got ", dropout_p,
                     " (xtrain.model.dropout)");
  DenseFlash kernel;
  kernel.causal = causal;
  return cpu::run_fused(kernel, q, k, v, dropout_p, seed);
}

}  // namespace xtrain::kernels::attention
