// kernels::gemm_out: checks, the ATen backend, and the dispatch between it and oneDNN
// (gemm_onednn.cpp) by the routing table (gemm_routing.cpp).
#include "xtrain/kernels/gemm.h"

#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "xtrain/base/cpu_isa.h"
#include "xtrain/kernels/gemm_backends.h"

namespace xtrain::kernels {

namespace {

bool unit_inner(const at::Tensor& t) {
  const int64_t n = t.dim();
  return t.stride(n - 1) == 1 || t.stride(n - 2) == 1 || t.size(n - 1) == 1 || t.size(n - 2) == 1;
}

void check(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args) {
  TORCH_CHECK(gemm_supports(a, b), "gemm: A and B must be CPU fp32 or bf16 tensors of one dtype, got ",
              a.scalar_type(), " and ", b.scalar_type());
  const int64_t n = c.dim();
  TORCH_CHECK(n >= 2 && n <= 6 && a.dim() == n && b.dim() == n, "gemm: A, B and C need the same rank (2 to 6), got ",
              a.sizes(), ", ", b.sizes(), ", ", c.sizes());
  TORCH_CHECK(c.scalar_type() == at::kFloat || c.scalar_type() == a.scalar_type(), "gemm: C must be fp32 or ",
              a.scalar_type(), ", got ", c.scalar_type());
  const int64_t M = c.size(n - 2), N = c.size(n - 1), K = a.size(n - 1);
  TORCH_CHECK(a.size(n - 2) == M && b.size(n - 2) == K && b.size(n - 1) == N, "gemm: shapes do not chain: A ",
              a.sizes(), " B ", b.sizes(), " C ", c.sizes());
  for (int64_t i = 0; i < n - 2; ++i) {
    TORCH_CHECK((a.size(i) == c.size(i) || a.size(i) == 1) && (b.size(i) == c.size(i) || b.size(i) == 1),
                "gemm: batch dim ", i, " of A ", a.sizes(), " or B ", b.sizes(), " does not broadcast to C ", c.sizes());
  }
  TORCH_CHECK(unit_inner(a) && unit_inner(b) && unit_inner(c), "gemm: each matrix needs unit stride in one of its "
              "last two dims, got strides ", a.strides(), ", ", b.strides(), ", ", c.strides());
  TORCH_CHECK(!args.bias.defined() || (args.bias.dim() == 1 && args.bias.size(0) == N && args.bias.is_contiguous()),
              "gemm: bias must be a contiguous [", N, "], got ", args.bias.sizes());
  TORCH_CHECK(!args.bias.defined() || args.alpha == 1.0, "gemm: bias with alpha != 1 is not supported");
}

}  // namespace

bool gemm_supports(const at::Tensor& a, const at::Tensor& b) {
  const auto t = a.scalar_type();
  return a.defined() && b.defined() && a.device().is_cpu() && b.device().is_cpu() && a.layout() == at::kStrided &&
         b.layout() == at::kStrided && t == b.scalar_type() && (t == at::kFloat || t == at::kBFloat16);
}

namespace detail {

// The reference semantics in ATen ops. bf16 inputs with an fp32 C are multiplied in fp32 (exact
// products, fp32 sums), as oneDNN does, not rounded to bf16 first.
void aten_gemm_out(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);  // the dtypes are ours
  const bool widen = c.scalar_type() != a.scalar_type();
  const auto A = widen ? a.to(c.scalar_type()) : a, B = widen ? b.to(c.scalar_type()) : b;
  const bool plain = c.dim() == 2 && args.beta == 0.0 && !args.add.defined() && c.is_contiguous();
  if (plain && args.bias.defined()) {
    at::addmm_out(const_cast<at::Tensor&>(c), args.bias.to(c.scalar_type()), A, B);
    return;
  }
  if (plain && args.alpha == 1.0) {
    at::mm_out(const_cast<at::Tensor&>(c), A, B);
    return;
  }
  auto r = c.dim() == 2 ? at::mm(A, B) : at::matmul(A, B);
  if (args.alpha != 1.0) r.mul_(args.alpha);
  if (args.bias.defined()) r.add_(args.bias);
  if (args.add.defined()) r.add_(args.add);
  auto& out = const_cast<at::Tensor&>(c);
  if (args.beta == 0.0) {
    out.copy_(r);
  } else {
    if (args.beta != 1.0) out.mul_(args.beta);
    out.add_(r);
  }
}

void gemm_out_with(GemmBackend backend, const at::Tensor& c, const at::Tensor& a, const at::Tensor& b,
                   const GemmArgs& args) {
  if (c.numel() == 0) return;
  if (a.size(-1) > 0 && backend == GemmBackend::kOneDnn && onednn_gemm_out(c, a, b, args)) return;
  aten_gemm_out(c, a, b, args);
}

}  // namespace detail

namespace {

// Without AVX-512, oneDNN has no bf16 GEMM kernel of its own (its fallback ran at 4.5 GFLOP/s on an
// AVX2 EPYC and rounded partial sums: 5% off a float64 reference). There bf16 operands are widened
// (exact), multiplied by the fp32 GEMM and rounded once: bf16 products summed in fp32, as on AVX-512.
bool widen_bf16(const at::Tensor& a) {
  static const bool native = base::best_cpu_isa() == base::Isa::kAvx512;
  return !native && a.scalar_type() == at::kBFloat16 && a.device().is_cpu();
}

void gemm_out_widened(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args) {
  GemmArgs wide = args;
  if (wide.bias.defined()) wide.bias = wide.bias.to(at::kFloat);
  if (wide.add.defined()) wide.add = wide.add.to(at::kFloat);
  const bool fp32_out = c.scalar_type() == at::kFloat;
  at::Tensor cf = fp32_out ? c : (args.beta != 0.0 ? c.to(at::kFloat) : at::empty(c.sizes(), c.options().dtype(at::kFloat)));
  gemm_out(cf, a.to(at::kFloat), b.to(at::kFloat), wide);
  if (!fp32_out) c.copy_(cf);
}

}  // namespace

void gemm_out(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const GemmArgs& args) {
  check(c, a, b, args);
  if (widen_bf16(a)) return gemm_out_widened(c, a, b, args);
  // For observers of ATen's ops (monitor's flops profiler, torch's profiler): oneDNN runs no ATen
  // op. Inputs are only built while an observer listens.
  RECORD_FUNCTION("xtrain::gemm", std::vector<c10::IValue>({a, b}));
  const int64_t n = c.dim();
  const int64_t batch = c.numel() / std::max<int64_t>(1, c.size(n - 2) * c.size(n - 1));
  const auto backend = gemm_backend_for(a.scalar_type(), batch, c.size(n - 2), c.size(n - 1), a.size(n - 1));
  detail::gemm_out_with(backend, c, a, b, args);
}

at::Tensor gemm(const at::Tensor& a, const at::Tensor& b, const GemmArgs& args,
                c10::optional<c10::ScalarType> out_dtype) {
  TORCH_CHECK(a.dim() >= 2 && a.dim() == b.dim(), "gemm: A and B need the same rank >= 2, got ", a.sizes(), " and ",
              b.sizes());
  auto sizes = a.sizes().vec();
  for (int64_t i = 0; i + 2 < a.dim(); ++i) sizes[i] = std::max(a.size(i), b.size(i));
  sizes.back() = b.size(-1);
  auto c = at::empty(sizes, a.options().dtype(out_dtype.value_or(a.scalar_type())));
  gemm_out(c, a, b, args);
  return c;
}

}  // namespace xtrain::kernels
