// The CUDA Adam/AdamW kernel's launcher: raw pointers, sizes, coefficients and a stream; no torch
// headers (STYLE.md rule 7). Same math and operation order as the CPU kernel (cpu/kernel_bodies.h),
// with explicitly rounded intrinsics so nvcc cannot contract differently: CPU and GPU agree bit for
// bit. adamw_cuda.cpp converts tensors and picks the stream.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace xtrain::optim::cuda {

enum class Dtype : int { kNone = 0, kFloat32 = 1, kBFloat16 = 2, kFloat16 = 3 };

// As cpu::AdamCoeffs: g = g*grad_scale + l2*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// p = p*decay_mul - step_size * m / (sqrt(v)/bc2_sqrt + eps).
struct AdamCoeffs {
  float grad_scale, l2, decay_mul, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
};

// Updates params, exp_avg, exp_avg_sq (fp32, numel elements) from grads (grad_type: fp32, bf16 or
// fp16) and writes the bf16/fp16 copy of the new params to lowp when lowp_type != kNone. Uses
// 16-byte vector loads when every pointer allows it. Returns the launch's error (cudaSuccess).
cudaError_t launch_adam(const AdamCoeffs& c, float* params, const void* grads, Dtype grad_type, float* exp_avg,
                        float* exp_avg_sq, void* lowp, Dtype lowp_type, int64_t numel, cudaStream_t stream);

}  // namespace xtrain::optim::cuda
