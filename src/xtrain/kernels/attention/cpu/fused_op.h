// The tensor side of the fused CPU attention kernels: input checks, compute-type workspaces, the
// autograd Function, and the conversion of results back to the input's dtype. A kernel type
// (dense flash, multi-scale) supplies only its key rows, bias, tile plan and the un-pooling of the
// key-row gradients. Design choice: backward recomputes the key rows (O(n·d)) instead of saving
// them; saved for backward are q, k, v, the output and one log-sum-exp per query. fp32 and bf16 run
// in fp32, fp64 in fp64 (gradcheck). Internal to kernels/: include only from .cpp files.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <optional>
#include <string>

#include "xtrain/kernels/attention/cpu/fused_driver.h"
#include "xtrain/kernels/attention/dense_reference.h"

namespace xtrain::kernels::attention::cpu {

// A kernel's keys for one call: rows_k / rows_v [BH, key_rows, d] (contiguous) in the compute
// type, the score bias [key_rows] (undefined: none) and the plan.
struct KeySource {
  at::Tensor rows_k, rows_v, bias;
  FusedProblem problem;
};

// Checks q, k, v ([B, NH, T, HS], same sizes, dtype fp32/bf16/fp64, CPU); `what` names the kernel.
void check_fused_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::string& what);
at::ScalarType compute_type(at::ScalarType input);
// [B, NH, T, HS] -> contiguous [B·NH, T, HS] in the compute type (a view when it already is).
at::Tensor heads_work(const at::Tensor& x);
// [B·NH, key_rows, HS] rows whose first T rows per head are x ([B, NH, T, HS], any dtype and
// strides), converted in one pass; the other rows are left for the caller.
at::Tensor rows_with_sequence(const at::Tensor& x, int64_t key_rows);
// The first T rows of each head of [B·NH, rows, HS] as [B, NH, T, HS] in `dtype` (a view when the
// dtype is the compute type).
at::Tensor heads_grad(const at::Tensor& rows, int64_t B, int64_t T, at::ScalarType dtype);

struct ForwardResult {
  at::Tensor out;  // input dtype, [B, NH, T, HS]
  at::Tensor lse;  // compute type, [B·NH, T]
};
ForwardResult fused_forward_op(const at::Tensor& q, const KeySource& keys, double p, uint64_t seed);

struct BackwardResult {
  at::Tensor dq;                // input dtype, [B, NH, T, HS]
  at::Tensor dk_rows, dv_rows;  // compute type, [B·NH, key_rows, HS]
};
BackwardResult fused_backward_op(const at::Tensor& q, const KeySource& keys, const at::Tensor& out,
                                 const at::Tensor& dout, const at::Tensor& lse, double p, uint64_t seed);

// Kernel: copyable, with
//   KeySource keys(const at::Tensor& k, const at::Tensor& v) const;   // the inputs as given
//   at::Tensor unpool(const at::Tensor& rows_grad, int64_t T) const;  // in place; -> rows, T first
//   void save(torch::autograd::AutogradContext* ctx) const;  static Kernel load(AutogradContext*);
template <class Kernel>
struct FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction<Kernel>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const Kernel& kernel, double p, int64_t seed) {
    const auto keys = kernel.keys(k, v);
    auto r = fused_forward_op(q, keys, p, static_cast<uint64_t>(seed));
    kernel.save(ctx);
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->save_for_backward({q, k, v, r.out, r.lse});
    return r.out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const Kernel kernel = Kernel::load(ctx);
    const int64_t B = q.size(0), T = q.size(2);
    const auto keys = kernel.keys(k, v);
    auto r = fused_backward_op(q, keys, saved[3], grads[0], saved[4], ctx->saved_data["p"].toDouble(),
                               static_cast<uint64_t>(ctx->saved_data["seed"].toInt()));
    return {r.dq, heads_grad(kernel.unpool(r.dk_rows, T), B, T, k.scalar_type()),
            heads_grad(kernel.unpool(r.dv_rows, T), B, T, v.scalar_type()), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Runs `kernel` with autograd when any input requires grad, without saving anything otherwise.
template <class Kernel>
at::Tensor run_fused(const Kernel& kernel, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double p,
                     std::optional<uint64_t> seed) {
  const uint64_t s = p > 0 ? (seed ? *seed : draw_dropout_seed()) : 0;
  if (q.requires_grad() || k.requires_grad() || v.requires_grad()) {
    return FusedAttentionFunction<Kernel>::apply(q, k, v, kernel, p, static_cast<int64_t>(s));
  }
  return fused_forward_op(q, kernel.keys(k, v), p, s).out;
}

}  // namespace xtrain::kernels::attention::cpu
