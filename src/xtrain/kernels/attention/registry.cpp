// The attention kernel registry (see registry.h): a mutex-guarded list, built-ins added on first
// use (no static registration objects, which a static library's linker would drop).
#include "xtrain/kernels/attention/registry.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <tuple>

#include "xtrain/base/error.h"
#include "xtrain/base/did_you_mean.h"
#include "xtrain/kernels/attention/builtin_kernels.h"
#include "xtrain/kernels/ms_attention/reference_2d.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::attention {

namespace {

constexpr const char* kKey = " (xtrain.model.attention.kernel)";

struct Entry {
  std::string name;
  AttentionImpl impl;
  AttentionSupports supports;
  AttentionPriority priority;
  int64_t order = 0;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<const Entry>> entries;
  int64_t next_order = 0;

  void add(const std::string& name, AttentionImpl impl, AttentionSupports supports, AttentionPriority priority) {
    XTRAIN_USAGE_CHECK(!name.empty() && name != "auto", "attention: a kernel cannot be named \"", name, "\"");
    XTRAIN_USAGE_CHECK(impl && supports && priority, "attention: kernel \"", name,
                       "\" needs an implementation, a supports() and a priority");
    std::lock_guard<std::mutex> lock(mutex);
    auto e = std::make_shared<Entry>(Entry{name, std::move(impl), std::move(supports), std::move(priority), 0});
    auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& x) { return x->name == name; });
    e->order = it != entries.end() ? (*it)->order : next_order++;
    if (it != entries.end()) {
      *it = e;
    } else {
      entries.push_back(e);
    }
  }

  std::vector<std::shared_ptr<const Entry>> snapshot() {
    std::lock_guard<std::mutex> lock(mutex);
    return entries;
  }
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: kernels may run during static destruction
    add_builtin_kernels([reg](const std::string& name, AttentionImpl impl, AttentionSupports supports,
                              AttentionPriority priority) {
      reg->add(name, std::move(impl), std::move(supports), std::move(priority));
    });
    return reg;
  }();
  return *r;
}

std::string list_with_support(const std::vector<std::shared_ptr<const Entry>>& entries, const AttentionCall& call) {
  std::ostringstream s;
  for (size_t i = 0; i < entries.size(); ++i) {
    s << (i ? ", " : "") << entries[i]->name << (entries[i]->supports(call) ? "" : " (does not support it)");
  }
  return s.str();
}

std::shared_ptr<const Entry> select(const std::string& name, const AttentionCall& call) {
  auto entries = registry().snapshot();
  if (name == "auto") {
    std::shared_ptr<const Entry> best;
    int best_priority = 0;
    for (const auto& e : entries) {
      if (!e->supports(call)) continue;
      const int p = e->priority(call);
      if (!best || p > best_priority || (p == best_priority && e->order < best->order)) {
        best = e;
        best_priority = p;
      }
    }
    XTRAIN_USAGE_CHECK(best != nullptr, "attention: no registered kernel supports ", describe(call), "; registered: ",
                       list_with_support(entries, call), kKey);
    return best;
  }
  auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e->name == name; });
  if (it == entries.end()) {
    std::vector<std::string> names;
    for (const auto& e : entries) names.push_back(e->name);
    names.push_back("auto");
    XTRAIN_USAGE_ERROR("attention: unknown kernel \"", name, "\"", did_you_mean_suffix(name, names),
                       "; registered: ", list_with_support(entries, call), kKey);
  }
  XTRAIN_USAGE_CHECK((*it)->supports(call), "attention: kernel \"", name, "\" does not support ", describe(call),
                     "; registered: ", list_with_support(entries, call), kKey);
  return *it;
}

}  // namespace

std::string describe(const AttentionCall& call) {
  std::ostringstream s;
  s << (call.multiscale() ? "multiscale " : "dense ") << (call.causal ? "causal" : "bidirectional") << " B=" << call.B
    << " NH=" << call.NH << " T=" << call.T << " HS=" << call.HS << " " << c10::toString(call.dtype) << " "
    << call.device;
  if (call.multiscale()) {
    s << " windows=[";
    for (size_t i = 0; i < call.windows.size(); ++i) s << (i ? "," : "") << call.windows[i];
    s << "]";
  }
  if (call.grid2d()) s << " grid=" << call.grid_h << "x" << call.grid_w << (call.cls_token ? "+cls" : "");
  s << " dropout=" << call.dropout;
  return s.str();
}

void register_attention_kernel(const std::string& name, AttentionImpl impl, AttentionSupports supports, int priority) {
  register_attention_kernel(name, std::move(impl), std::move(supports),
                            [priority](const AttentionCall&) { return priority; });
}

void register_attention_kernel(const std::string& name, AttentionImpl impl, AttentionSupports supports,
                               AttentionPriority priority) {
  registry().add(name, std::move(impl), std::move(supports), std::move(priority));
}

bool unregister_attention_kernel(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = std::find_if(r.entries.begin(), r.entries.end(), [&](const auto& e) { return e->name == name; });
  if (it == r.entries.end()) return false;
  r.entries.erase(it);
  return true;
}

std::vector<std::string> attention_kernel_names() {
  auto entries = registry().snapshot();
  AttentionCall any;  // priorities are listed for a default call
  std::stable_sort(entries.begin(), entries.end(),
                   [&](const auto& a, const auto& b) { return a->priority(any) > b->priority(any); });
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e->name);
  return names;
}

std::string select_attention_kernel(const std::string& name, const AttentionCall& call) {
  check_attention_call(call);
  return select(name, call)->name;
}

void check_attention_call(const AttentionCall& call) {
  XTRAIN_USAGE_CHECK(call.B > 0 && call.NH > 0 && call.T > 0 && call.HS > 0,
                     "attention: sizes must be > 0, got B=", call.B, " NH=", call.NH, " T=", call.T, " HS=", call.HS);
  if (call.multiscale()) ms_attention::check_windows(call.NH, call.windows);
  XTRAIN_USAGE_CHECK(call.dropout >= 0 && call.dropout < 1, "attention: dropout must be in [0, 1), got ", call.dropout,
                     " (xtrain.model.dropout)");
  if (!call.grid2d()) {
    XTRAIN_USAGE_CHECK(call.grid_w == 0 && !call.cls_token && call.grid_h == 0,
                       "attention: a 1-D call has no grid_w or class token; got grid ", call.grid_h, "x", call.grid_w,
                       call.cls_token ? " with a class token" : "", " (set grid_h > 0 for a 2-D call)");
    return;
  }
  XTRAIN_USAGE_CHECK(call.grid_w > 0, "attention: the 2-D grid must be at least 1x1, got ", call.grid_h, "x",
                     call.grid_w, " (xtrain.model grid)");
  const int64_t tokens = call.grid_h * call.grid_w + (call.cls_token ? 1 : 0);
  XTRAIN_USAGE_CHECK(call.T == tokens, "attention: the 2-D grid ", call.grid_h, "x", call.grid_w,
                     call.cls_token ? " plus a class token" : "", " needs T = ", tokens, " tokens, got T = ", call.T,
                     " (xtrain.model grid / pool)");
  XTRAIN_USAGE_CHECK(!call.causal, "attention: 2-D attention over a patch grid is bidirectional; got a causal call ",
                     "(grid ", call.grid_h, "x", call.grid_w, ")");
}

AttentionCall attention_call_for(const at::Tensor& q, bool causal, const std::vector<int64_t>& windows,
                                 double dropout) {
  XTRAIN_USAGE_CHECK(q.dim() == 4, "attention: q must be [B, NH, T, HS], got ", q.sizes());
  AttentionCall call;
  call.B = q.size(0);
  call.NH = q.size(1);
  call.T = q.size(2);
  call.HS = q.size(3);
  call.dtype = q.scalar_type();
  call.device = q.device();
  call.causal = causal;
  call.windows = windows;
  call.dropout = dropout;
  return call;
}

namespace {

void check_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  XTRAIN_USAGE_CHECK(q.dim() == 4, "attention: q must be [B, NH, T, HS], got ", q.sizes());
  XTRAIN_USAGE_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(), "attention: q, k, v must have one shape, got q ",
                     q.sizes(), " k ", k.sizes(), " v ", v.sizes());
  XTRAIN_USAGE_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
                     "attention: q, k, v must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
                     v.scalar_type());
  XTRAIN_USAGE_CHECK(k.device() == q.device() && v.device() == q.device(), "attention: q, k, v must be on one device, got ",
                     q.device(), ", ", k.device(), ", ", v.device());
  XTRAIN_USAGE_CHECK(at::isFloatingType(q.scalar_type()), "attention: dtype must be floating point, got ",
                     q.scalar_type());
}

}  // namespace

at::Tensor run_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                         const std::vector<int64_t>& windows, double dropout, const std::string& kernel) {
  check_qkv(q, k, v);
  const AttentionCall call = attention_call_for(q, causal, windows, dropout);
  check_attention_call(call);
  // For observers of ATen's ops (monitor's flops profiler): the fused kernels run no ATen op.
  RECORD_FUNCTION("xtrain::attention", std::vector<c10::IValue>({q, k, v, causal, c10::IValue(windows)}));
  return select(kernel, call)->impl(q, k, v, call);
}

namespace {

// Sum over heads of the keys each query sees (2-D rule, docs/design/multiscale-attention-2d.md),
// counted on the dense reference's visibility mask; cached per (grid, window, class token).
int64_t key_visits_2d(int64_t NH, const std::vector<int64_t>& windows, int64_t gh, int64_t gw, bool cls) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, int64_t, bool>, int64_t> cache;
  int64_t total = 0;
  for (int64_t h = 0; h < NH; ++h) {
    const int64_t w = ms_attention::window_of_head(h, NH, windows);
    std::lock_guard<std::mutex> lock(mu);
    auto [it, fresh] = cache.try_emplace({gh, gw, w, cls}, 0);
    if (fresh) it->second = ms_attention::visibility_mask_2d(gh, gw, w, cls).sum().item<int64_t>();
    total += it->second;
  }
  return total;
}

}  // namespace

at::Tensor run_attention_2d(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::vector<int64_t>& windows, int64_t grid_h, int64_t grid_w, bool cls_token,
                            double dropout, const std::string& kernel) {
  check_qkv(q, k, v);
  XTRAIN_USAGE_CHECK(grid_h >= 1 && grid_w >= 1, "attention: the 2-D grid must be at least 1x1, got ", grid_h, "x",
                     grid_w, " (xtrain.model grid)");
  AttentionCall call = attention_call_for(q, /*causal=*/false, windows, dropout);
  call.grid_h = grid_h;
  call.grid_w = grid_w;
  call.cls_token = cls_token;
  check_attention_call(call);
  if (windows.empty()) {
    // Dense: the grid does not change the result; profiled as dense bidirectional attention.
    RECORD_FUNCTION("xtrain::attention", std::vector<c10::IValue>({q, k, v, false, c10::IValue(windows)}));
    return select(kernel, call)->impl(q, k, v, call);
  }
  // A name of its own: the flops profiler's 1-D multi-scale count does not apply to a grid, so the
  // record carries the (query, key) pairs of one batch element over all heads (built only when a
  // profiler listens).
  RECORD_FUNCTION("xtrain::attention_2d",
                  std::vector<c10::IValue>({q, k, v, c10::IValue(windows), grid_h, grid_w, cls_token,
                                            key_visits_2d(q.size(1), windows, grid_h, grid_w, cls_token)}));
  return select(kernel, call)->impl(q, k, v, call);
}

}  // namespace xtrain::kernels::attention
