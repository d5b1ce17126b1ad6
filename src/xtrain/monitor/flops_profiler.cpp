// Built without the shared precompiled header and with NDEBUG (cmake/XtrainWeb.cmake), as LibTorch
// itself is: RecordFunction::inputs() has a debug-only check of a flag that a release LibTorch
// never sets, so without NDEBUG every call would throw.
#ifndef NDEBUG
#define NDEBUG
#endif
#include "xtrain/monitor/flops_profiler.h"

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <iterator>

#include "xtrain/monitor/flops.h"

namespace xtrain::monitor {

using Clock = std::chrono::steady_clock;

struct FlopsProfiler::State {
  struct Node {
    std::string name, type;
    int parent = -1, depth = 0;
    bool leaf = true;
    int64_t own_params = 0;
    double flops = 0, seconds = 0;  // exclusive: ops given to this module itself
  };
  struct Range {
    uintptr_t begin, end;
    int node;
  };
  std::vector<Node> nodes;
  std::vector<Range> ranges;  // parameter storage, sorted by begin
  // Copies of parameters made during the profile (autocast's casts before a GEMM): owned by the
  // parameter's module; the tensors are held so their memory cannot be reused meanwhile.
  std::vector<std::pair<at::Tensor, Range>> copies;
  int current = 0;            // module of the last op that had a parameter input
  int enclosing = 0;          // where ops without one go: current's parent when current is a leaf
  int top_module = 0;         // module of the outermost op now running
  int op_depth = 0, flop_depth = 0;
};

namespace {

// RecordFunction takes plain function pointers, so the callbacks find their profiler here; one
// per thread, set only between start() and stop().
thread_local FlopsProfiler::State* t_active = nullptr;

struct OpContext : at::ObserverContext {
  bool top = false, counted = false, by_param = false;
  int module = 0;
  Clock::time_point start;
  std::vector<int64_t> conv_input, conv_weight;  // inputs are only readable in the start callback
  bool conv_transposed = false;
};

std::vector<int64_t> shape(const c10::IValue& v) {
  if (!v.isTensor() || !v.toTensor().defined()) return {};
  const auto s = v.toTensor().sizes();
  return std::vector<int64_t>(s.begin(), s.end());
}

double numel(const std::vector<int64_t>& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

// Multiply-adds of at::matmul's broadcasting rules.
double matmul_macs(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) return 0;
  if (a.size() == 1 && b.size() == 1) return static_cast<double>(a[0]);
  if (a.size() == 1) return numel(b);
  if (b.size() == 1) return numel(a);
  double batch = 1;
  const size_t na = a.size() - 2, nb = b.size() - 2;
  for (size_t i = 0; i < std::max(na, nb); ++i) {
    const int64_t da = i < na ? a[na - 1 - i] : 1, db = i < nb ? b[nb - 1 - i] : 1;
    batch *= static_cast<double>(std::max(da, db));
  }
  return batch * static_cast<double>(a[a.size() - 2]) * static_cast<double>(a.back()) * static_cast<double>(b.back());
}

bool is_conv(std::string_view op) {
  return op == "aten::conv1d" || op == "aten::conv2d" || op == "aten::conv3d" || op == "aten::convolution" ||
         op == "aten::_convolution" || op.substr(0, 20) == "aten::conv_transpose";
}

int64_t floor_to(int64_t x, int64_t a) { return (x >= 0 ? x / a : -((-x + a - 1) / a)) * a; }  // down(x, a)
int64_t ceil_to(int64_t x, int64_t a) { return -floor_to(-x, a); }                              // up(x, a)

// Pooled keys query i sees under multi-scale attention, summed over the n queries: the key
// selection rules of shared/design/multiscale-attention.md, counted (not enumerated).
double multiscale_keys(int64_t n, int64_t w, bool causal) {
  double keys = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (causal) {
      for (int64_t e = i + 1, l = 0;; ++l) {  // level l covers [s, e)
        const int64_t s = std::max<int64_t>(0, floor_to(e - (w << l), int64_t{2} << l));
        keys += static_cast<double>((e >> l) - (s >> l));
        if (s == 0) break;
        e = s;
      }
      continue;
    }
    int64_t s = std::max<int64_t>(0, floor_to(i - w / 2, 2)), f = std::min<int64_t>(n, ceil_to(i + 1 + (w + 1) / 2, 2));
    keys += static_cast<double>(f - s);
    for (int64_t l = 1; s > 0 || f < n; ++l) {
      const int64_t ns = std::max<int64_t>(0, floor_to(s - (w / 2 << l), int64_t{2} << l));
      const int64_t nf = std::min<int64_t>(n, ceil_to(f + (w / 2 << l), int64_t{2} << l));
      keys += static_cast<double>((s >> l) - (ns >> l));
      if (f < n) keys += static_cast<double>(ceil_to(nf, int64_t{1} << l) / (int64_t{1} << l) - (f >> l));
      s = ns;
      f = nf;
    }
  }
  return keys;
}

// q [B, NH, T, HS]; heads split into len(windows) groups as evenly as possible (the first NH mod S
// groups one head more). Per (query, pooled key): 2·HS for the score, 2·HS for the weighted value.
double multiscale_flops(const std::vector<int64_t>& q, bool causal, const std::vector<int64_t>& windows) {
  const int64_t B = q[0], NH = q[1], T = q[2], HS = q[3], S = static_cast<int64_t>(windows.size());
  double flops = 0;
  for (int64_t g = 0; g < S && g < NH; ++g) {
    const int64_t heads = NH / S + (g < NH % S ? 1 : 0);
    flops += static_cast<double>(heads) * 4.0 * static_cast<double>(HS) * multiscale_keys(T, windows[g], causal);
  }
  return static_cast<double>(B) * flops;
}

// Forward FLOPs of a matrix-product op from its inputs; -1 when `op` is not one.
double matmul_flops(std::string_view op, c10::ArrayRef<const c10::IValue> in) {
  auto s = [&](size_t i) { return i < in.size() ? shape(in[i]) : std::vector<int64_t>{}; };
  if (op == "aten::linear" || op == "aten::mkldnn_linear") {
    const auto x = s(0), w = s(1);
    return w.size() == 2 && !x.empty() ? 2.0 * numel(x) * static_cast<double>(w[0]) : 0.0;
  }
  if (op == "aten::mm" || op == "aten::bmm" || op == "aten::matmul") return 2.0 * matmul_macs(s(0), s(1));
  if (op == "aten::addmm" || op == "aten::baddbmm" || op == "aten::addbmm") return 2.0 * matmul_macs(s(1), s(2));
  // xtrain's own kernels (kernels/gemm.cpp, kernels/attention/registry.cpp) record these, so the
  // GEMMs they run in oneDNN, and fused attention, are seen although no ATen op runs them.
  if (op == "xtrain::gemm") return 2.0 * matmul_macs(s(0), s(1));  // a [..., M, K], b [..., K, N]
  // 2-D multi-scale (kernels/attention/registry.cpp): 4·HS per (query, key) pair, the pairs of one
  // batch element over all heads recorded as the last input.
  if (op == "xtrain::attention_2d" && in.size() > 7 && in[7].isInt()) {
    const auto q = s(0);  // [B, NH, T, HS]
    return q.size() == 4 ? 4.0 * static_cast<double>(q[0] * q[3]) * static_cast<double>(in[7].toInt()) : 0.0;
  }
  const bool xtrain_attention = op == "xtrain::attention";
  if (xtrain_attention && in.size() > 4 && in[4].isIntList() && !in[4].toIntVector().empty()) {
    const auto q = s(0);  // [B, NH, T, HS]
    return q.size() == 4 ? multiscale_flops(q, in[3].isBool() && in[3].toBool(), in[4].toIntVector()) : 0.0;
  }
  if (xtrain_attention || op == "aten::scaled_dot_product_attention" || op == "aten::_scaled_dot_product_attention") {
    const auto q = s(0), k = s(1), v = s(2);  // [..., Tq, D], [..., Tk, D], [..., Tk, Dv]
    if (q.size() < 2 || k.size() < 2 || v.size() < 2) return 0.0;
    const double tk = static_cast<double>(k[k.size() - 2]);
    return 2.0 * numel(q) * tk + 2.0 * (numel(q) / static_cast<double>(q.back())) * tk * static_cast<double>(v.back());
  }
  return -1.0;
}

void capture_conv(std::string_view op, c10::ArrayRef<const c10::IValue> in, OpContext& ctx) {
  if (in.size() < 2) return;
  ctx.conv_input = shape(in[0]);
  ctx.conv_weight = shape(in[1]);
  ctx.conv_transposed = op.substr(0, 20) == "aten::conv_transpose";
  if ((op == "aten::convolution" || op == "aten::_convolution") && in.size() > 6 && in[6].isBool()) {
    ctx.conv_transposed = in[6].toBool();
  }
}

// 2 · (multiply-adds per output element) · outputs; transposed: per input element instead.
double conv_flops(const OpContext& ctx, const at::RecordFunction& fn) {
  const auto& w = ctx.conv_weight;
  if (w.empty() || w[0] == 0 || fn.outputs().empty()) return 0;
  const double per = numel(w) / static_cast<double>(w[0]);
  return 2.0 * per * (ctx.conv_transposed ? numel(ctx.conv_input) : numel(shape(fn.outputs()[0])));
}

int owner_of(const FlopsProfiler::State& st, const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return -1;
  const auto p = reinterpret_cast<uintptr_t>(t.data_ptr());
  auto it = std::upper_bound(st.ranges.begin(), st.ranges.end(), p,
                             [](uintptr_t v, const FlopsProfiler::State::Range& r) { return v < r.begin; });
  if (it != st.ranges.begin() && p < std::prev(it)->end) return std::prev(it)->node;
  for (const auto& [keep, r] : st.copies) {
    if (p >= r.begin && p < r.end) return r.node;
  }
  return -1;
}

bool is_copy(std::string_view op) {
  return op == "aten::to" || op == "aten::_to_copy" || op == "aten::contiguous" || op == "aten::clone" ||
         op == "aten::_autocast_to_reduced_precision";
}

// A top-level copy of a parameter (a cast before a GEMM): its output belongs to the same module.
void remember_copy(FlopsProfiler::State& st, const at::RecordFunction& fn, int module) {
  if (fn.outputs().empty() || !fn.outputs()[0].isTensor()) return;
  const at::Tensor& t = fn.outputs()[0].toTensor();
  if (!t.defined() || !t.has_storage() || t.numel() == 0 || owner_of(st, t) >= 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  st.copies.push_back({t, {begin, begin + static_cast<uintptr_t>(t.numel() * t.element_size()), module}});
}

int attribute(FlopsProfiler::State& st, c10::ArrayRef<const c10::IValue> inputs, bool* by_param) {
  for (const auto& v : inputs) {
    int m = -1;
    if (v.isTensor()) {
      m = owner_of(st, v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        if ((m = owner_of(st, t)) >= 0) break;
      }
    }
    if (m >= 0) {
      *by_param = true;
      st.current = m;
      const auto& node = st.nodes[m];
      st.enclosing = node.leaf && node.parent >= 0 ? node.parent : m;
      return m;
    }
  }
  return st.enclosing;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  FlopsProfiler::State* st = t_active;
  if (st == nullptr) return nullptr;
  auto ctx = std::make_unique<OpContext>();
  ctx->top = st->op_depth++ == 0;
  if (ctx->top) {
    st->top_module = attribute(*st, fn.inputs(), &ctx->by_param);
    ctx->start = Clock::now();
  }
  ctx->module = st->top_module;
  const std::string_view op = fn.name();
  if (st->flop_depth == 0) {
    const double f = matmul_flops(op, fn.inputs());
    ctx->counted = f >= 0 || is_conv(op);
    if (f > 0) st->nodes[ctx->module].flops += f;
    if (f < 0 && ctx->counted) capture_conv(op, fn.inputs(), *ctx);
  }
  if (ctx->counted) ++st->flop_depth;
  return ctx;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* base) {
  FlopsProfiler::State* st = t_active;
  auto* ctx = static_cast<OpContext*>(base);
  if (st == nullptr || ctx == nullptr) return;
  if (ctx->counted) {
    --st->flop_depth;
    if (!ctx->conv_weight.empty()) st->nodes[ctx->module].flops += conv_flops(*ctx, fn);
  }
  --st->op_depth;
  if (!ctx->top) return;
  st->nodes[ctx->module].seconds += std::chrono::duration<double>(Clock::now() - ctx->start).count();
  if (ctx->by_param && is_copy(fn.name())) remember_copy(*st, fn, ctx->module);
}

std::string type_name(const torch::nn::Module& m) {
  std::string n = m.name();
  const size_t colon = n.rfind("::");
  if (colon != std::string::npos) n = n.substr(colon + 2);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0) n.resize(n.size() - 4);
  return n;
}

}  // namespace

FlopsProfiler::FlopsProfiler(const torch::nn::Module& model) : state_(std::make_unique<State>()) {
  std::map<std::string, int> index;
  std::set<const c10::TensorImpl*> seen;  // a tied parameter belongs to its first module
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    State::Node node;
    node.name = item.key();
    node.type = type_name(*item.value());
    const size_t dot = node.name.rfind('.');
    node.parent = node.name.empty() ? -1 : index.at(dot == std::string::npos ? "" : node.name.substr(0, dot));
    node.depth = node.parent < 0 ? 0 : state_->nodes[node.parent].depth + 1;
    if (node.parent >= 0) state_->nodes[node.parent].leaf = false;
    const int id = static_cast<int>(state_->nodes.size());
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      const at::Tensor& t = p.value();
      if (!t.defined() || !seen.insert(t.unsafeGetTensorImpl()).second) continue;
      node.own_params += t.numel();
      const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
      state_->ranges.push_back({begin, begin + static_cast<uintptr_t>(t.numel() * t.element_size()), id});
    }
    index[node.name] = id;
    state_->nodes.push_back(std::move(node));
  }
  std::sort(state_->ranges.begin(), state_->ranges.end(),
            [](const State::Range& a, const State::Range& b) { return a.begin < b.begin; });
}

FlopsProfiler::~FlopsProfiler() { stop(); }

void FlopsProfiler::start() {
  if (handle_ != 0) return;
  TORCH_CHECK(t_active == nullptr, "monitor: another FlopsProfiler is already running on this thread");
  state_->current = state_->enclosing = state_->top_module = 0;
  state_->op_depth = state_->flop_depth = 0;
  t_active = state_.get();
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                           .needsInputs(true)
                                           .needsOutputs(true)
                                           .scopes({at::RecordScope::FUNCTION}));
}

void FlopsProfiler::stop() {
  if (handle_ == 0) return;
  at::removeCallback(handle_);
  handle_ = 0;
  t_active = nullptr;
  state_->copies.clear();
}

void FlopsProfiler::reset() {
  for (auto& n : state_->nodes) n.flops = n.seconds = 0;
}

std::vector<ModuleProfile> FlopsProfiler::modules() const {
  std::vector<ModuleProfile> out;
  for (const auto& n : state_->nodes) out.push_back({n.name, n.type, n.depth, n.own_params, n.flops, n.seconds});
  for (size_t i = out.size(); i-- > 1;) {  // pre-order: children come after their parent
    auto& parent = out[state_->nodes[i].parent];
    parent.params += out[i].params;
    parent.flops += out[i].flops;
    parent.seconds += out[i].seconds;
  }
  return out;
}

double FlopsProfiler::forward_flops() const { return modules().front().flops; }
double FlopsProfiler::forward_seconds() const { return modules().front().seconds; }

}  // namespace xtrain::monitor
