// Tensor plumbing of the fused CPU attention kernels (see fused_op.h): workspaces in the compute
// type, dispatch on fp32/fp64, conversion back to the input's dtype.
#include "xtrain/kernels/attention/cpu/fused_op.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>

#include <cmath>

#include "xtrain/base/error.h"

namespace xtrain::kernels::attention::cpu {

void check_fused_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::string& what) {
  XTRAIN_USAGE_CHECK(q.dim() == 4, what, ": q must be [B, NH, T, HS], got ", q.sizes());
  XTRAIN_USAGE_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(), what, ": q, k, v must have one shape, got q ",
                     q.sizes(), " k ", k.sizes(), " v ", v.sizes());
  XTRAIN_USAGE_CHECK(q.numel() > 0, what, ": empty input ", q.sizes());
  XTRAIN_USAGE_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), what,
                     ": q, k, v must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
                     v.scalar_type());
  const auto t = q.scalar_type();
  XTRAIN_USAGE_CHECK(t == at::kFloat || t == at::kBFloat16 || t == at::kDouble, what,
                     ": dtype must be float32, bfloat16 or float64, got ", t);
  XTRAIN_USAGE_CHECK(q.is_cpu() && k.is_cpu() && v.is_cpu(), what, ": inputs must be on the CPU, got ", q.device());
}

at::ScalarType compute_type(at::ScalarType input) { return input == at::kDouble ? at::kDouble : at::kFloat; }

at::Tensor heads_work(const at::Tensor& x) {
  return x.to(compute_type(x.scalar_type())).contiguous().view({x.size(0) * x.size(1), x.size(2), x.size(3)});
}

at::Tensor rows_with_sequence(const at::Tensor& x, int64_t key_rows) {
  const int64_t B = x.size(0), NH = x.size(1), T = x.size(2), d = x.size(3);
  auto rows = at::empty({B * NH, key_rows, d}, x.options().dtype(compute_type(x.scalar_type())));
  rows.narrow(1, 0, T).view({B, NH, T, d}).copy_(x);
  return rows;
}

at::Tensor heads_grad(const at::Tensor& rows, int64_t B, int64_t T, at::ScalarType dtype) {
  const auto heads = rows.narrow(1, 0, T).view({B, rows.size(0) / B, T, rows.size(2)});
  return heads.scalar_type() == dtype ? heads : heads.to(dtype);
}

namespace {

// q * scale as contiguous [B·NH, T, HS] in the compute type, in one pass when q needs no conversion.
at::Tensor scaled_queries(const at::Tensor& q, double scale) {
  const auto ct = compute_type(q.scalar_type());
  if (q.scalar_type() != ct) return heads_work(q).mul_(scale);
  auto out = at::empty({q.size(0) * q.size(1), q.size(2), q.size(3)}, q.options());
  auto heads = out.view(q.sizes());
  at::mul_out(heads, q, at::scalar_tensor(scale, q.options()));
  return out;
}

template <typename T>
FusedBuffers<T> buffers(const at::Tensor& qw, const KeySource& keys) {
  FusedBuffers<T> b;
  b.q = qw.data_ptr<T>();
  b.k = keys.rows_k.data_ptr<T>();
  b.v = keys.rows_v.data_ptr<T>();
  b.bias = keys.bias.defined() ? keys.bias.data_ptr<T>() : nullptr;
  return b;
}

DropoutArgs dropout_args(double p, uint64_t seed) {
  DropoutArgs d;
  d.p = p;
  d.seed = seed;
  return d;
}

}  // namespace

ForwardResult fused_forward_op(const at::Tensor& q, const KeySource& keys, double p, uint64_t seed) {
  const int64_t d = q.size(3);
  const auto qw = scaled_queries(q, 1.0 / std::sqrt(static_cast<double>(d)));
  auto o = at::empty_like(qw);
  auto lse = at::empty({qw.size(0), qw.size(1)}, qw.options());
  if (qw.scalar_type() == at::kDouble) {
    fused_forward<double>(keys.problem, buffers<double>(qw, keys), dropout_args(p, seed),
                          o.data_ptr<double>(), lse.data_ptr<double>());
  } else {
    fused_forward<float>(keys.problem, buffers<float>(qw, keys), dropout_args(p, seed), o.data_ptr<float>(),
                         lse.data_ptr<float>());
  }
  const auto out = o.view(q.sizes());
  return {out.scalar_type() == q.scalar_type() ? out : out.to(q.scalar_type()), lse};
}

BackwardResult fused_backward_op(const at::Tensor& q, const KeySource& keys, const at::Tensor& out,
                                 const at::Tensor& dout, const at::Tensor& lse, double p, uint64_t seed) {
  const int64_t d = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto qw = scaled_queries(q, scale);
  const auto dw = heads_work(dout);
  const auto delta = at::mul(dw, heads_work(out)).sum(-1);  // rowsum(dO ∘ O), O after dropout
  auto dq = at::empty_like(qw), dk = at::empty_like(keys.rows_k), dv = at::empty_like(keys.rows_v);
  if (qw.scalar_type() == at::kDouble) {
    fused_backward<double>(keys.problem, buffers<double>(qw, keys), dropout_args(p, seed),
                           dw.data_ptr<double>(), lse.data_ptr<double>(), delta.data_ptr<double>(), scale,
                           dq.data_ptr<double>(), dk.data_ptr<double>(), dv.data_ptr<double>());
  } else {
    fused_backward<float>(keys.problem, buffers<float>(qw, keys), dropout_args(p, seed), dw.data_ptr<float>(),
                          lse.data_ptr<float>(), delta.data_ptr<float>(), static_cast<float>(scale),
                          dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>());
  }
  const auto dqh = dq.view(q.sizes());
  return {dqh.scalar_type() == q.scalar_type() ? dqh : dqh.to(q.scalar_type()), dk, dv};
}

}  // namespace xtrain::kernels::attention::cpu
