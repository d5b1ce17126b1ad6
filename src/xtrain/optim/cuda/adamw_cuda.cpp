// Binding of the CUDA Adam kernel (see adamw_cuda.h): tensor -> pointer at `begin`, dtype tags,
// the current stream of the params' device. The .cu file sees no torch header.
#include "xtrain/optim/cuda/adamw_cuda.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include "xtrain/optim/cuda/adamw_kernel.cuh"

namespace xtrain::optim::cuda {

namespace {

Dtype dtype_of(const at::Tensor& t) {
  if (!t.defined()) return Dtype::kNone;
  switch (t.scalar_type()) {
    case c10::ScalarType::Float: return Dtype::kFloat32;
    case c10::ScalarType::BFloat16: return Dtype::kBFloat16;
    case c10::ScalarType::Half: return Dtype::kFloat16;
    default: TORCH_CHECK(false, "optim: the CUDA Adam kernel takes fp32, bf16 or fp16, got ", t.scalar_type());
  }
}

void* at_element(const at::Tensor& t, int64_t i) {
  return t.defined() ? static_cast<char*>(t.data_ptr()) + i * static_cast<int64_t>(t.element_size()) : nullptr;
}

}  // namespace

void adam_update(const cpu::AdamCoeffs& c, const at::Tensor& params, const at::Tensor& grads,
                 const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq, const at::Tensor& lowp, int64_t begin,
                 int64_t end) {
  TORCH_CHECK(params.is_cuda() && grads.is_cuda() && exp_avg.is_cuda() && exp_avg_sq.is_cuda() &&
                  (!lowp.defined() || lowp.is_cuda()),
              "optim: the CUDA Adam kernel needs every buffer on the GPU");
  TORCH_CHECK(begin >= 0 && begin <= end && end <= params.numel(), "optim: range [", begin, ", ", end,
              ") outside ", params.numel(), " elements");
  const c10::cuda::CUDAGuard guard(params.device());
  const AdamCoeffs k{c.grad_scale, c.l2,          c.decay_mul, c.beta1, c.one_minus_beta1,
                     c.beta2,      c.one_minus_beta2, c.bc2_sqrt, c.eps, c.neg_step_size};
  C10_CUDA_CHECK(launch_adam(k, static_cast<float*>(at_element(params, begin)), at_element(grads, begin),
                             dtype_of(grads), static_cast<float*>(at_element(exp_avg, begin)),
                             static_cast<float*>(at_element(exp_avg_sq, begin)), at_element(lowp, begin),
                             dtype_of(lowp), end - begin, c10::cuda::getCurrentCUDAStream().stream()));
}

}  // namespace xtrain::optim::cuda
