// The oneDNN backend of kernels::gemm_out: one matmul primitive per (shapes, strides, dtypes,
// attributes), created once and kept in a mutex-guarded map; execution runs outside the lock on a
// per-thread stream, with a user scratchpad from the CPU allocator (the memory pool) instead of
// oneDNN's own malloc. alpha is an output scale and beta a sum post-op; `add` is folded into C
// first and accumulated with beta = 1, because oneDNN 2.6 runs a broadcast binary-add post-op
// ([1, 1, T, T] on [B, NH, T, T]) only in its reference kernel: ~10^4x slower, measured.
#include <ATen/ops/empty.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "xtrain/kernels/gemm_backends.h"

namespace xtrain::kernels::detail {

namespace {

using dnnl::memory;

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

memory::data_type dnnl_type(c10::ScalarType t) {
  TORCH_INTERNAL_ASSERT(t == at::kFloat || t == at::kBFloat16, "gemm: oneDNN path got ", t);
  return t == at::kFloat ? memory::data_type::f32 : memory::data_type::bf16;
}

// Strides as oneDNN wants them: a size-1 dim gets the dense stride, so a broadcast or squeezed dim
// does not hide the plain layout the fast (brgemm) kernels look for.
memory::dims clean_strides(const at::Tensor& t) {
  memory::dims s = t.strides().vec();
  for (int64_t i = t.dim() - 1; i >= 0; --i) {
    if (t.size(i) == 1) s[i] = i + 1 < t.dim() ? s[i + 1] * std::max<int64_t>(t.size(i + 1), 1) : 1;
  }
  return s;
}

memory::desc md_of(const at::Tensor& t) { return {t.sizes().vec(), dnnl_type(t.scalar_type()), clean_strides(t)}; }

// Prepares C so that a GEMM with sum post-op scale beta' (1 when beta = 0, else beta) yields
// alpha·A·B + add + beta·C: C ← add (beta = 0), add + C (beta = 1), add/beta + C (otherwise).
void fold_add_into(const at::Tensor& c, const GemmArgs& args) {
  auto& out = const_cast<at::Tensor&>(c);
  if (args.beta == 0.0) {
    out.copy_(args.add.expand_as(c));
  } else if (args.beta == 1.0) {
    out.add_(args.add);
  } else {
    out.add_(args.add, 1.0 / args.beta);
  }
}

using Key = std::vector<int64_t>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
    return static_cast<size_t>(h);
  }
};

void push_tensor(Key& k, const at::Tensor& t) {
  if (!t.defined()) {
    k.push_back(-1);
    return;
  }
  k.push_back(static_cast<int64_t>(t.scalar_type()));
  for (int64_t s : t.sizes()) k.push_back(s);
  for (int64_t s : clean_strides(t)) k.push_back(s);
}

int64_t bits_of(double v) {
  const float f = static_cast<float>(v);
  int32_t b = 0;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

struct Entry {
  bool ok = false;
  dnnl::matmul prim;
  memory::desc a, b, c, bias;
  size_t scratch = 0;
  std::string impl;
};

std::shared_ptr<const Entry> create(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b,
                                    const at::Tensor& bias, double alpha, double beta) {
  auto e = std::make_shared<Entry>();
  e->a = md_of(a);
  e->b = md_of(b);
  e->c = md_of(c);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(alpha)});
  if (beta != 0.0) {
    dnnl::post_ops ops;
    ops.append_sum(static_cast<float>(beta));
    attr.set_post_ops(ops);
  }
  try {
    dnnl::matmul::primitive_desc pd;
    if (bias.defined()) {
      memory::dims dims(c.dim(), 1), strides(c.dim(), bias.numel());
      dims.back() = bias.numel();
      strides.back() = 1;
      e->bias = memory::desc(dims, dnnl_type(bias.scalar_type()), strides);
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->a, e->b, e->bias, e->c), attr, cpu_engine());
    } else {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->a, e->b, e->c), attr, cpu_engine());
    }
    e->prim = dnnl::matmul(pd);
    e->scratch = pd.scratchpad_desc().get_size();
    e->impl = pd.impl_info_str();
    e->ok = true;
  } catch (const dnnl::error&) {
    e->ok = false;  // no implementation for this layout: the caller falls back to ATen
  }
  return e;
}

std::shared_ptr<const Entry> lookup(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b,
                                    const at::Tensor& bias, double alpha, double beta) {
  static std::mutex mu;
  static std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> cache;
  Key key;
  key.reserve(64);
  for (const auto* t : {&a, &b, &c, &bias}) push_tensor(key, *t);
  key.push_back(bits_of(alpha));
  key.push_back(bits_of(beta));
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto e = create(c, a, b, bias, alpha, beta);  // under the lock: created once, even when raced
  cache.emplace(std::move(key), e);
  return e;
}

void* ptr(const at::Tensor& t) { return const_cast<void*>(t.data_ptr()); }

}  // namespace

bool onednn_gemm_out(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args,
                     std::string* impl) {
  double beta = args.beta;
  if (args.add.defined() && beta == 0.0) beta = 1.0;  // C holds `add` (fold_add_into): accumulate onto it
  const auto e = lookup(c, a, b, args.bias, args.alpha, beta);
  if (!e->ok) return false;
  if (args.add.defined()) fold_add_into(c, args);
  if (impl != nullptr) *impl = e->impl;
  auto& eng = cpu_engine();
  std::unordered_map<int, memory> margs = {{DNNL_ARG_SRC, memory(e->a, eng, ptr(a))},
                                           {DNNL_ARG_WEIGHTS, memory(e->b, eng, ptr(b))},
                                           {DNNL_ARG_DST, memory(e->c, eng, ptr(c))}};
  if (args.bias.defined()) margs.emplace(DNNL_ARG_BIAS, memory(e->bias, eng, ptr(args.bias)));
  at::Tensor scratch;
  if (e->scratch > 0) {
    scratch = at::empty({static_cast<int64_t>(e->scratch)}, at::TensorOptions().dtype(at::kByte));
    margs.emplace(DNNL_ARG_SCRATCHPAD, memory({{static_cast<int64_t>(e->scratch)}, memory::data_type::u8,
                                               memory::format_tag::a},
                                              eng, scratch.data_ptr()));
  }
  auto& s = thread_stream();
  e->prim.execute(s, margs);
  s.wait();
  return true;
}

}  // namespace xtrain::kernels::detail
