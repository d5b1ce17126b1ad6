// What the 1-D and 2-D CUDA bindings (ms_attention_cuda.cpp, ms_attention_2d_cuda.cpp) share: the
// dtype and stride translation into the kernels' plain structs, the input checks before a launch,
// and the backward's key rows -> [B, NH, T, HS] gradients. Header-only, CUDA builds only.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/kernels/ms_attention/cuda/ms_attention_cuda.h"
#include "xtrain/kernels/ms_attention/cuda/ms_attention_kernel.cuh"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention::binding {

// `kernel` names the registered kernel in messages ("ms_fused_cuda").
inline cuda::Dtype dtype_of(c10::ScalarType t, const char* kernel) {
  switch (t) {
    case c10::ScalarType::Float: return cuda::Dtype::kFloat32;
    case c10::ScalarType::BFloat16: return cuda::Dtype::kBFloat16;
    case c10::ScalarType::Half: return cuda::Dtype::kFloat16;
    default: XTRAIN_USAGE_ERROR("attention (", kernel, "): dtype must be float32, bfloat16 or float16, got ", t);
  }
}

// Last dimension contiguous, as the kernels index it.
inline at::Tensor unit_last(const at::Tensor& x) { return x.stride(3) == 1 ? x : x.contiguous(); }

inline cuda::Strides strides_of(const at::Tensor& x) { return {x.stride(0), x.stride(1), x.stride(2)}; }

// q, k, v one [B, NH, T, HS] shape on one GPU, one supported dtype, HS and the windows within the
// kernels' limits.
inline void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::vector<int64_t>& windows, const char* kernel) {
  XTRAIN_USAGE_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(), "attention (", kernel,
                     "): q, k, v must be one [B, NH, T, HS] shape, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  XTRAIN_USAGE_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device(), "attention (", kernel,
                     "): q, k, v must be on one GPU, got ", q.device(), ", ", k.device(), ", ", v.device());
  XTRAIN_USAGE_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                         cuda_supports(q.size(3), q.scalar_type()),
                     "attention (", kernel, "): needs one dtype of float32/bfloat16/float16 and HS <= ",
                     cuda::kMaxHeadSize, ", got ", q.scalar_type(), " HS=", q.size(3));
  check_windows(q.size(1), windows);
  XTRAIN_USAGE_CHECK(windows.size() <= static_cast<size_t>(cuda::kMaxWindows), "attention (", kernel, "): at most ",
                     cuda::kMaxWindows, " windows, got ", windows.size(), " (xtrain.model.attention.windows)");
}

// The backward's fp32 key-row gradients [B·NH, rows, HS]: the first T rows as [B, NH, T, HS] in
// `like`'s dtype.
inline at::Tensor rows_to_heads(const at::Tensor& rows, const at::Tensor& like, int64_t B, int64_t NH, int64_t T,
                                int64_t HS) {
  return rows.narrow(1, 0, T).reshape({B, NH, T, HS}).to(like.scalar_type());
}

}  // namespace xtrain::kernels::ms_attention::binding
