// The attention core in standard ONNX ops. Dense causal: S = (q·kᵀ)·(1/√HS) + mask[:T, :T], the
// mask an initializer [max_T, max_T] (0 on and below the diagonal, −inf above) sliced to the
// input's T. Multi-scale (shared/design/multiscale-attention.md): the pooled levels are one MatMul
// with a constant averaging matrix P [R, T] (K_pooled = P·k, V_pooled = P·v), and each head's
// visibility and log(size) bias are one constant [NH, T, R] added to the scores, i.e. the dense
// masked reference of that page; T is fixed to the exported length. GridAttention (the ViT's): the
// same with the 2-D tables of its fixed patch grid (reference_2d.h), and no mask when dense.
#include <ATen/Functions.h>

#include <cmath>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/export/onnx/emitters.h"
#include "xtrain/kernels/ms_attention/reference.h"
#include "xtrain/kernels/ms_attention/reference_2d.h"
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

// The 2-D tables for a gh x gw grid (+ a class token, token 0): M [K, T] (K = blocks (+1)), row b
// the mean over block b's patches and the last row token 0; the bias [NH, T, K] as in 1-D.
std::pair<at::Tensor, at::Tensor> grid_tables(int64_t gh, int64_t gw, bool cls, int64_t NH,
                                              const std::vector<int64_t>& windows) {
  namespace ms = kernels::ms_attention;
  const int64_t n = gh * gw, c0 = cls ? 1 : 0;
  const auto pooled = ms::pool_levels_2d_reference(at::eye(n, at::kDouble), gh, gw);  // [blocks, n]
  const int64_t blocks = pooled.size(0);
  auto M = at::zeros({blocks + c0, n + c0}, at::kDouble);
  M.narrow(0, 0, blocks).narrow(1, c0, n).copy_(pooled);
  if (cls) M.select(0, blocks).select(0, 0).fill_(1.0);
  const auto log_size = ms::key_log_sizes_2d(gh, gw, cls, at::empty({0}, at::kFloat));  // [K]
  ms::check_windows(NH, windows);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < NH; ++h) {
    const auto visible = ms::visibility_mask_2d(gh, gw, ms::window_of_head(h, NH, windows), cls);  // [T, K]
    heads.push_back(at::where(visible, log_size.expand({n + c0, log_size.size(0)}),
                              at::full({}, -std::numeric_limits<float>::infinity(), at::kFloat)));
  }
  return {M.to(at::kFloat).contiguous(), at::stack(heads)};
}

int64_t embed_width(const EmitContext& c, int value) {
  for (const auto& n : c.graph.nodes) {
    if (n.output == value && n.kind == compress::OpKind::kLinear) return n.weight.size(0) / 3;
  }
  TORCH_CHECK(false, "export: attention input is not produced by its qkv Linear");
}

struct Qkv {
  std::string q, k, v;  // [B, NH, T, HS]
};

// The fused qkv value [B, T, 3C] -> q, k, v.
Qkv split_qkv(EmitContext& c, const std::string& x, int64_t NH, int64_t HS, const std::string& p) {
  auto& b = c.b;
  const auto heads = b.node("Reshape", {x, b.ints(p + ".shape5", {0, 0, 3, NH, HS})}, p + ".split");
  const auto perm = b.node("Transpose", {heads}, p + ".qkv", {{"perm", std::vector<int64_t>{2, 0, 3, 1, 4}}});
  auto pick = [&](int64_t k, const char* what) {
    return b.node("Gather", {perm, b.initializer(p + ".index", at::full({}, k, at::kLong))}, p + "." + what,
                  {{"axis", int64_t{0}}});
  };
  return {pick(0, "q"), pick(1, "k"), pick(2, "v")};
}

// Softmax(q·kᵀ/√HS + bias)·v, heads merged back to [B, T, C] (no bias: "").
std::string attend(EmitContext& c, const Qkv& h, const std::string& bias, int64_t C, int64_t HS, const std::string& p) {
  auto& b = c.b;
  const auto kt = b.node("Transpose", {h.k}, p + ".k_t", {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  std::string s = b.node("Mul", {b.node("MatMul", {h.q, kt}, p + ".qk"), b.scalar(p + ".scale", 1.0f / std::sqrt(static_cast<float>(HS)))},
                         p + ".scores");
  if (!bias.empty()) s = b.node("Add", {s, bias}, p + ".masked");
  const auto probs = b.node("Softmax", {s}, p + ".softmax", {{"axis", int64_t{-1}}});
  const auto y = b.node("MatMul", {probs, h.v}, p + ".pv");
  const auto t = b.node("Transpose", {y}, p + ".merge", {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  return b.node("Reshape", {t, b.ints(p + ".shape3", {0, 0, C})}, p);
}

}  // namespace

std::string emit_attention(EmitContext& c, size_t i) {
  const auto& n = c.graph.nodes[i];
  const int64_t C = embed_width(c, n.inputs[0]), NH = n.heads;
  const std::string& p = n.name;
  auto& b = c.b;
  auto h = split_qkv(c, c.values[n.inputs[0]], NH, C / NH, p);
  std::string bias;
  if (!n.windows.empty()) {
    XTRAIN_USAGE_CHECK(c.fixed_T > 0, "export: multi-scale attention '", p, "' needs a fixed sequence length");
    const auto [P, B] = multiscale_tables(c.fixed_T, NH, n.windows, n.causal);
    const auto pool = b.initializer(p + ".pool", P);
    h.k = b.node("MatMul", {pool, h.k}, p + ".k_pooled");
    h.v = b.node("MatMul", {pool, h.v}, p + ".v_pooled");
    bias = b.initializer(p + ".bias", B);
  } else if (n.causal) {
    const auto mask = at::full({n.max_T, n.max_T}, -std::numeric_limits<float>::infinity()).triu_(1);
    const auto ends = b.node("Concat", {c.seq_len, c.seq_len}, p + ".mask_ends", {{"axis", int64_t{0}}});
    bias = b.node("Slice", {b.initializer(p + ".mask", mask), b.ints(p + ".zeros2", {0, 0}), ends,
                            b.ints(p + ".axes01", {0, 1})},
                  p + ".mask_tt");
  }
  return attend(c, h, bias, C, C / NH, p);
}

// 2-D (docs/design/multiscale-attention-2d.md): bidirectional; multi-scale keys and values are one
// MatMul with the constant [K, T] matrix of the grid's block means (then the class token's own row),
// and each head's visibility and log(size) bias one constant [NH, T, K], for the node's fixed grid.
std::string emit_grid_attention(EmitContext& c, size_t i) {
  const auto& n = c.graph.nodes[i];
  const int64_t C = embed_width(c, n.inputs[0]), NH = n.heads;
  const std::string& p = n.name;
  auto h = split_qkv(c, c.values[n.inputs[0]], NH, C / NH, p);
  std::string bias;
  if (!n.windows.empty()) {
    const auto [M, B] = grid_tables(n.grid_h, n.grid_w, n.cls_token, NH, n.windows);
    const auto pool = c.b.initializer(p + ".pool", M);
    h.k = c.b.node("MatMul", {pool, h.k}, p + ".k_pooled");
    h.v = c.b.node("MatMul", {pool, h.v}, p + ".v_pooled");
    bias = c.b.initializer(p + ".bias", B);
  }
  return attend(c, h, bias, C, C / NH, p);
}

}  // namespace xtrain::onnx_export
