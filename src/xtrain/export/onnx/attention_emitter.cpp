// The attention core in standard ONNX ops. Dense causal: S = (q·kᵀ)·(1/√HS) + mask[:T, :T], the
// mask an initializer [max_T, max_T] (0 on and below the diagonal, −inf above) sliced to the
// input's T. Multi-scale (shared/design/multiscale-attention.md): the pooled levels are one MatMul
// with a constant averaging matrix P [R, T] (K_pooled = P·k, V_pooled = P·v), and each head's
// visibility and log(size) bias are one constant [NH, T, R] added to the scores, i.e. the dense
// masked reference of that page; T is fixed to the exported length.
#include <ATen/Functions.h>

#include <cmath>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/export/onnx/emitters.h"
#include "xtrain/kernels/ms_attention/reference.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::onnx_export {

namespace {

// P [R, T] and the per-head bias [NH, T, R]: log(size) where visible, −inf elsewhere.
std::pair<at::Tensor, at::Tensor> multiscale_tables(int64_t T, int64_t NH, const std::vector<int64_t>& windows,
                                                    bool causal) {
  namespace ms = kernels::ms_attention;
  const auto P = ms::pool_levels_reference(at::eye(T, at::kDouble)).to(at::kFloat).contiguous();  // [R, T]
  const auto log_size = ms::row_log_sizes(T, at::empty({0}, at::kFloat));
  ms::check_windows(NH, windows);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < NH; ++h) {
    const auto visible = ms::visibility_mask(T, ms::window_of_head(h, NH, windows), causal);  // [T, R]
    heads.push_back(at::where(visible, log_size.expand({T, log_size.size(0)}),
                              at::full({}, -std::numeric_limits<float>::infinity(), at::kFloat)));
  }
  return {P, at::stack(heads)};
}

int64_t embed_width(const EmitContext& c, int value) {
  for (const auto& n : c.graph.nodes) {
    if (n.output == value && n.kind == compress::OpKind::kLinear) return n.weight.size(0) / 3;
  }
  TORCH_CHECK(false, "export: attention input is not produced by its qkv Linear");
}

}  // namespace

std::string emit_attention(EmitContext& c, size_t i) {
  const auto& n = c.graph.nodes[i];
  const int64_t C = embed_width(c, n.inputs[0]), NH = n.heads, HS = C / NH;
  const std::string& p = n.name;
  auto& b = c.b;
  const auto heads = b.node("Reshape", {c.values[n.inputs[0]], b.ints(p + ".shape5", {0, 0, 3, NH, HS})}, p + ".split");
  const auto perm = b.node("Transpose", {heads}, p + ".qkv", {{"perm", std::vector<int64_t>{2, 0, 3, 1, 4}}});
  auto pick = [&](int64_t k, const char* what) {
    return b.node("Gather", {perm, b.initializer(p + ".index", at::full({}, k, at::kLong))}, p + "." + what,
                  {{"axis", int64_t{0}}});
  };
  const auto q = pick(0, "q");
  std::string k = pick(1, "k"), v = pick(2, "v");
  std::string bias;
  if (!n.windows.empty()) {
    XTRAIN_USAGE_CHECK(c.fixed_T > 0, "export: multi-scale attention '", p, "' needs a fixed sequence length");
    const auto [P, B] = multiscale_tables(c.fixed_T, NH, n.windows, n.causal);
    const auto pool = b.initializer(p + ".pool", P);
    k = b.node("MatMul", {pool, k}, p + ".k_pooled");
    v = b.node("MatMul", {pool, v}, p + ".v_pooled");
    bias = b.initializer(p + ".bias", B);
  } else if (n.causal) {
    const auto mask = at::full({n.max_T, n.max_T}, -std::numeric_limits<float>::infinity()).triu_(1);
    const auto ends = b.node("Concat", {c.seq_len, c.seq_len}, p + ".mask_ends", {{"axis", int64_t{0}}});
    bias = b.node("Slice", {b.initializer(p + ".mask", mask), b.ints(p + ".zeros2", {0, 0}), ends,
                            b.ints(p + ".axes01", {0, 1})},
                  p + ".mask_tt");
  }
  const auto kt = b.node("Transpose", {k}, p + ".k_t", {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  std::string s = b.node("Mul", {b.node("MatMul", {q, kt}, p + ".qk"), b.scalar(p + ".scale", 1.0f / std::sqrt(static_cast<float>(HS)))},
                         p + ".scores");
  if (!bias.empty()) s = b.node("Add", {s, bias}, p + ".masked");
  const auto probs = b.node("Softmax", {s}, p + ".softmax", {{"axis", int64_t{-1}}});
  const auto y = b.node("MatMul", {probs, v}, p + ".pv");
  const auto t = b.node("Transpose", {y}, p + ".merge", {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  return b.node("Reshape", {t, b.ints(p + ".shape3", {0, 0, C})}, p);
}

}  // namespace xtrain::onnx_export
