// Multi-scale attention on CUDA (see ms_attention_kernel.cuh): pooling and un-pooling one level per
// launch (element-parallel), forward and backward one warp per query (the per-query bodies are
// ms_attention_warp.cuh's, shared with the 2-D kernel). Each lane holds HS/32 of the query's
// elements; a key row costs one warp reduction (two in backward). The key ranges come from
// ms_rules.h and the dropout mask from dropout_hash.h: the CPU kernel's exactly.
#include "xtrain/kernels/ms_attention/cuda/ms_attention_kernel.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "xtrain/kernels/ms_attention/cuda/ms_attention_warp.cuh"
#include "xtrain/kernels/ms_attention/ms_rules.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention::cuda {

namespace {

__device__ __forceinline__ int64_t window_of(const Problem& p, int64_t h) {
  return p.windows[group_of_head(h, p.NH, p.num_windows)];  // windows.h: array_split groups
}

// Calls f(row, bias) for every pooled row query i of head h sees.
template <class F>
__device__ __forceinline__ void for_each_row(const Problem& p, int64_t h, int64_t i, F&& f) {
  const auto visit = [&](const SegmentRange& r) {
    const int64_t off = level_offset(p.T, r.level);
    for (int64_t m = r.begin; m < r.end; ++m) f(off + m, logf(static_cast<float>(segment_size(p.T, r.level, m))));
  };
  if (p.causal) {
    for_each_causal_range(i, window_of(p, h), visit);
  } else {
    for_each_bidirectional_range(i, p.T, window_of(p, h), visit);
  }
}

// The factor a kept weight is multiplied by (0 when dropped, 1 without dropout).
__device__ __forceinline__ float dropout_factor(const Problem& p, uint64_t stream, int64_t i, int64_t row) {
  if (p.dropout <= 0) return 1.f;
  return dropout_keep_factor(p.dropout, p.seed, stream, i, row);
}

// Level l from level l-1: the size-weighted mean of the two children (or the lone last one).
__global__ void pool_level_kernel(Problem p, int l, int64_t rows, float* pooled) {
  const int64_t prev_off = level_offset(p.T, l - 1), prev_rows = level_rows(p.T, l - 1);
  const int64_t off = level_offset(p.T, l), cur_rows = level_rows(p.T, l);
  const int64_t total = p.B * p.NH * cur_rows * p.HS;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx % p.HS, m = (idx / p.HS) % cur_rows, bh = idx / (p.HS * cur_rows);
    float* head = pooled + bh * rows * p.HS;
    const float a = head[(prev_off + 2 * m) * p.HS + e];
    float out = a;
    if (2 * m + 1 < prev_rows) {
      const float sa = static_cast<float>(segment_size(p.T, l - 1, 2 * m));
      const float sb = static_cast<float>(segment_size(p.T, l - 1, 2 * m + 1));
      out = (sa * a + sb * head[(prev_off + 2 * m + 1) * p.HS + e]) / (sa + sb);
    }
    head[(off + m) * p.HS + e] = out;
  }
}

// g(l) = g(l) / size + g(l+1)[parent], from the top level down.
__global__ void unpool_level_kernel(Problem p, int l, int levels, int64_t rows, float* g) {
  const int64_t off = level_offset(p.T, l), cur_rows = level_rows(p.T, l);
  const int64_t parent_off = l + 1 < levels ? level_offset(p.T, l + 1) : -1;
  const int64_t total = p.B * p.NH * cur_rows * p.HS;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx % p.HS, m = (idx / p.HS) % cur_rows, bh = idx / (p.HS * cur_rows);
    float* head = g + bh * rows * p.HS;
    float v = head[(off + m) * p.HS + e] / static_cast<float>(segment_size(p.T, l, m));
    if (parent_off >= 0) v += head[(parent_off + m / 2) * p.HS + e];
    head[(off + m) * p.HS + e] = v;
  }
}

template <typename T>
__global__ void forward_kernel(Problem p, const T* __restrict__ q, Strides sq, const float* __restrict__ kpool,
                               const float* __restrict__ vpool, int64_t rows, T* __restrict__ out, float* lse) {
  forward_query(
      p, q, sq, kpool, vpool, rows, out, lse, [&](int64_t h, int64_t i, auto&& f) { for_each_row(p, h, i, f); },
      [&](uint64_t bh, int64_t i, int64_t row) { return dropout_factor(p, bh, i, row); });
}

template <typename T>
__global__ void backward_kernel(Problem p, const T* __restrict__ q, Strides sq, const T* __restrict__ dout, Strides sd,
                                const T* __restrict__ out, const float* __restrict__ kpool,
                                const float* __restrict__ vpool, const float* __restrict__ lse, int64_t rows,
                                T* __restrict__ dq, float* dkpool, float* dvpool) {
  backward_query(
      p, q, sq, dout, sd, out, kpool, vpool, lse, rows, dq, dkpool, dvpool,
      [&](int64_t h, int64_t i, auto&& f) { for_each_row(p, h, i, f); },
      [&](uint64_t bh, int64_t i, int64_t row) { return dropout_factor(p, bh, i, row); });
}

template <typename T>
cudaError_t pool_typed(const Problem& p, const T* x, Strides s, float* pooled, cudaStream_t stream) {
  const int64_t rows = total_rows(p.T);
  constexpr int kThreads = 256;
  copy_tokens_kernel<T><<<grid_for(p.B * p.NH * p.T * p.HS, kThreads), kThreads, 0, stream>>>(p, x, s, rows, pooled);
  cudaError_t err = cudaGetLastError();
  for (int l = 1; l < num_levels(p.T) && err == cudaSuccess; ++l) {
    pool_level_kernel<<<grid_for(p.B * p.NH * level_rows(p.T, l) * p.HS, kThreads), kThreads, 0, stream>>>(
        p, l, rows, pooled);
    err = cudaGetLastError();
  }
  return err;
}

bool valid(const Problem& p) {
  return p.B > 0 && p.NH > 0 && p.T > 0 && p.HS > 0 && p.HS <= kMaxHeadSize && p.num_windows > 0 &&
         p.num_windows <= kMaxWindows && p.NH >= p.num_windows;
}

}  // namespace

cudaError_t launch_pool(const Problem& p, const void* x, Dtype dtype, Strides s, float* pooled, cudaStream_t stream) {
  if (!valid(p)) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    return pool_typed(p, static_cast<const T*>(x), s, pooled, stream);
  });
}

cudaError_t launch_forward(const Problem& p, const void* q, Strides sq, Dtype dtype, const float* kpool,
                           const float* vpool, void* out, float* lse, cudaStream_t stream) {
  if (!valid(p)) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<warp_grid(p), kWarpsPerBlock * kWarp, 0, stream>>>(
        p, static_cast<const T*>(q), sq, kpool, vpool, total_rows(p.T), static_cast<T*>(out), lse);
    return cudaGetLastError();
  });
}

template <typename T>
cudaError_t backward_typed(const Problem& p, const T* q, Strides sq, const T* dout, Strides sd, const T* out,
                           const float* kpool, const float* vpool, const float* lse, T* dq, float* dkpool,
                           float* dvpool, cudaStream_t stream) {
  const int64_t rows = total_rows(p.T);
  backward_kernel<T><<<warp_grid(p), kWarpsPerBlock * kWarp, 0, stream>>>(p, q, sq, dout, sd, out, kpool, vpool, lse,
                                                                          rows, dq, dkpool, dvpool);
  cudaError_t err = cudaGetLastError();
  const int levels = num_levels(p.T);
  constexpr int kThreads = 256;
  for (int l = levels - 1; l >= 0 && err == cudaSuccess; --l) {
    const int grid = grid_for(p.B * p.NH * level_rows(p.T, l) * p.HS, kThreads);
    unpool_level_kernel<<<grid, kThreads, 0, stream>>>(p, l, levels, rows, dkpool);
    err = cudaGetLastError();
    if (err != cudaSuccess) break;
    unpool_level_kernel<<<grid, kThreads, 0, stream>>>(p, l, levels, rows, dvpool);
    err = cudaGetLastError();
  }
  return err;
}

cudaError_t launch_backward(const Problem& p, const void* q, Strides sq, const void* dout, Strides sd,
                            const void* out, Dtype dtype, const float* kpool, const float* vpool, const float* lse,
                            void* dq, float* dkpool, float* dvpool, cudaStream_t stream) {
  if (!valid(p)) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward_typed(p, static_cast<const T*>(q), sq, static_cast<const T*>(dout), sd, static_cast<const T*>(out),
                          kpool, vpool, lse, static_cast<T*>(dq), dkpool, dvpool, stream);
  });
}

}  // namespace xtrain::kernels::ms_attention::cuda
