// Adam/AdamW on CUDA flat buffers: the tensor-side binding of adamw_kernel.cu (checks, pointers at
// an element offset, the current stream, the launch checked with C10_CUDA_CHECK). Compiled only
// with a CUDA LibTorch (XTRAIN_WITH_CUDA); the optimizer calls it when params are on a GPU.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "xtrain/optim/cpu/kernels.h"

namespace xtrain::optim::cuda {

// One launch over elements [begin, end) of the flat CUDA buffers (lowp may be undefined).
void adam_update(const cpu::AdamCoeffs& c, const at::Tensor& params, const at::Tensor& grads,
                 const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq, const at::Tensor& lowp, int64_t begin,
                 int64_t end);

}  // namespace xtrain::optim::cuda
