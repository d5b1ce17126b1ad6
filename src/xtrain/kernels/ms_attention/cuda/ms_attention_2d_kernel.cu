// 2-D multi-scale attention on CUDA (see ms_attention_2d_kernel.cuh): pooling and un-pooling one
// level per launch (element-parallel; un-pooling runs over children, so no two threads write one
// row), forward and backward one warp per query over the blocks ms_rules_2d.h selects (the
// per-query bodies are ms_attention_warp.cuh's, shared with the 1-D kernel).
#include "xtrain/kernels/ms_attention/cuda/ms_attention_2d_kernel.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "xtrain/kernels/ms_attention/cuda/ms_attention_warp.cuh"
#include "xtrain/kernels/ms_attention/ms_rules_2d.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention::cuda {

namespace {

constexpr int kThreads = 256;

// Key row of block (a, b) of level l: the tokens first (patches after the class token), then levels.
XTRAIN_HD int64_t row_of(const Problem2d& p, int l, int64_t a, int64_t b) {
  const int64_t c0 = p.cls ? 1 : 0;
  return c0 + level_offset_2d(p.gh, p.gw, l) + a * level_rows(p.gw, l) + b;
}

// Calls f(row, bias) for every key row token t of head h sees.
template <class F>
__device__ __forceinline__ void for_each_row_2d(const Problem2d& p, int64_t h, int64_t t, F&& f) {
  const int64_t c0 = p.cls ? 1 : 0, n = p.gh * p.gw;
  if (p.cls && t == 0) {  // the class query: every patch, and itself
    for (int64_t j = 0; j < n; ++j) f(c0 + j, 0.f);
    f(int64_t{0}, 0.f);
    return;
  }
  const int64_t w = p.windows[group_of_head(h, p.NH, p.num_windows)];
  const int64_t patch = t - c0, gh = p.gh, gw = p.gw;
  for_each_level_2d(patch / gw, patch % gw, gh, gw, w, [&](int l, AxisSpan rs, AxisSpan cs, AxisSpan prs, AxisSpan pcs) {
    const int64_t z = int64_t{1} << l;
    for (int64_t a = rs.s / z; a < up(rs.f, z) / z; ++a) {
      for (int64_t b = cs.s / z; b < up(cs.f, z) / z; ++b) {
        if (l > 0 && block_in_span(a, l, gh, prs) && block_in_span(b, l, gw, pcs)) continue;
        f(row_of(p, l, a, b), logf(static_cast<float>(block_size_2d(gh, gw, l, a, b))));
      }
    }
  });
  if (p.cls) f(int64_t{0}, 0.f);
}

__device__ __forceinline__ float dropout_factor(const Problem2d& p, uint64_t stream, int64_t t, int64_t row) {
  if (p.dropout <= 0) return 1.f;
  const int64_t query = strip_position_2d(t, p.gh, p.gw, p.cls ? 1 : 0, p.strip_width);
  return dropout_keep_factor(p.dropout, p.seed, stream, query, row);
}

// Level l >= 1 from level l-1: the size-weighted mean of the (up to four) children.
__global__ void pool_level_2d_kernel(Problem2d p, int l, int64_t rows, float* out) {
  const int64_t nr = level_rows(p.gh, l), nc = level_rows(p.gw, l);
  const int64_t cr = level_rows(p.gh, l - 1), cc = level_rows(p.gw, l - 1);
  const int64_t total = p.B * p.NH * nr * nc * p.HS;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx % p.HS, j = (idx / p.HS) % (nr * nc), bh = idx / (p.HS * nr * nc);
    const int64_t a = j / nc, b = j % nc;
    float* head = out + bh * rows * p.HS;
    float sum = 0.f;
    for (int64_t ca = 2 * a; ca < 2 * a + 2 && ca < cr; ++ca) {
      for (int64_t cb = 2 * b; cb < 2 * b + 2 && cb < cc; ++cb) {
        const float size = static_cast<float>(block_size_2d(p.gh, p.gw, l - 1, ca, cb));
        sum += size * head[row_of(p, l - 1, ca, cb) * p.HS + e];
      }
    }
    head[row_of(p, l, a, b) * p.HS + e] = sum / static_cast<float>(block_size_2d(p.gh, p.gw, l, a, b));
  }
}

// Level l-1 (children) += level l (parent) · child size / parent size; from the top level down.
__global__ void unpool_level_2d_kernel(Problem2d p, int l, int64_t rows, float* g) {
  const int64_t cr = level_rows(p.gh, l - 1), cc = level_rows(p.gw, l - 1);
  const int64_t total = p.B * p.NH * cr * cc * p.HS;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx % p.HS, j = (idx / p.HS) % (cr * cc), bh = idx / (p.HS * cr * cc);
    const int64_t ca = j / cc, cb = j % cc;
    float* head = g + bh * rows * p.HS;
    const float w = static_cast<float>(block_size_2d(p.gh, p.gw, l - 1, ca, cb)) /
                    static_cast<float>(block_size_2d(p.gh, p.gw, l, ca / 2, cb / 2));
    head[row_of(p, l - 1, ca, cb) * p.HS + e] += w * head[row_of(p, l, ca / 2, cb / 2) * p.HS + e];
  }
}

template <typename T>
__global__ void forward_2d_kernel(Problem2d p, const T* __restrict__ q, Strides sq, const float* __restrict__ krows,
                                  const float* __restrict__ vrows, int64_t rows, T* __restrict__ out, float* lse) {
  forward_query(
      p, q, sq, krows, vrows, rows, out, lse, [&](int64_t h, int64_t i, auto&& f) { for_each_row_2d(p, h, i, f); },
      [&](uint64_t bh, int64_t i, int64_t row) { return dropout_factor(p, bh, i, row); });
}

template <typename T>
__global__ void backward_2d_kernel(Problem2d p, const T* __restrict__ q, Strides sq, const T* __restrict__ dout,
                                   Strides sd, const T* __restrict__ out, const float* __restrict__ krows,
                                   const float* __restrict__ vrows, const float* __restrict__ lse, int64_t rows,
                                   T* __restrict__ dq, float* dkrows, float* dvrows) {
  backward_query(
      p, q, sq, dout, sd, out, krows, vrows, lse, rows, dq, dkrows, dvrows,
      [&](int64_t h, int64_t i, auto&& f) { for_each_row_2d(p, h, i, f); },
      [&](uint64_t bh, int64_t i, int64_t row) { return dropout_factor(p, bh, i, row); });
}

bool valid(const Problem2d& p) {
  return p.B > 0 && p.NH > 0 && p.HS > 0 && p.HS <= kMaxHeadSize && p.gh > 0 && p.gw > 0 &&
         p.T == p.gh * p.gw + (p.cls ? 1 : 0) && p.num_windows > 0 && p.num_windows <= kMaxWindows &&
         p.NH >= p.num_windows && p.strip_width > 0;
}

template <typename T>
cudaError_t pool_typed(const Problem2d& p, const T* x, Strides s, float* rows, cudaStream_t stream) {
  const int64_t R = key_rows_2d(p);
  copy_tokens_kernel<T><<<grid_for(p.B * p.NH * p.T * p.HS, kThreads), kThreads, 0, stream>>>(p, x, s, R, rows);
  cudaError_t err = cudaGetLastError();
  for (int l = 1; l < num_levels_2d(p.gh, p.gw) && err == cudaSuccess; ++l) {
    const int grid = grid_for(p.B * p.NH * level_blocks_2d(p.gh, p.gw, l) * p.HS, kThreads);
    pool_level_2d_kernel<<<grid, kThreads, 0, stream>>>(p, l, R, rows);
    err = cudaGetLastError();
  }
  return err;
}

template <typename T>
cudaError_t backward_typed(const Problem2d& p, const T* q, Strides sq, const T* dout, Strides sd, const T* out,
                           const float* krows, const float* vrows, const float* lse, T* dq, float* dkrows,
                           float* dvrows, cudaStream_t stream) {
  const int64_t R = key_rows_2d(p);
  backward_2d_kernel<T><<<warp_grid(p), kWarpsPerBlock * kWarp, 0, stream>>>(p, q, sq, dout, sd, out, krows, vrows,
                                                                             lse, R, dq, dkrows, dvrows);
  cudaError_t err = cudaGetLastError();
  for (int l = num_levels_2d(p.gh, p.gw) - 1; l >= 1 && err == cudaSuccess; --l) {
    const int grid = grid_for(p.B * p.NH * level_blocks_2d(p.gh, p.gw, l - 1) * p.HS, kThreads);
    unpool_level_2d_kernel<<<grid, kThreads, 0, stream>>>(p, l, R, dkrows);
    err = cudaGetLastError();
    if (err != cudaSuccess) break;
    unpool_level_2d_kernel<<<grid, kThreads, 0, stream>>>(p, l, R, dvrows);
    err = cudaGetLastError();
  }
  return err;
}

}  // namespace

int64_t key_rows_2d(const Problem2d& p) { return (p.cls ? 1 : 0) + total_blocks_2d(p.gh, p.gw); }

cudaError_t launch_pool_2d(const Problem2d& p, const void* x, Dtype dtype, Strides s, float* rows,
                           cudaStream_t stream) {
  if (!valid(p)) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    return pool_typed(p, static_cast<const T*>(x), s, rows, stream);
  });
}

cudaError_t launch_forward_2d(const Problem2d& p, const void* q, Strides sq, Dtype dtype, const float* krows,
                              const float* vrows, void* out, float* lse, cudaStream_t stream) {
  if (!valid(p)) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    forward_2d_kernel<T><<<warp_grid(p), kWarpsPerBlock * kWarp, 0, stream>>>(
        p, static_cast<const T*>(q), sq, krows, vrows, key_rows_2d(p), static_cast<T*>(out), lse);
    return cudaGetLastError();
  });
}

cudaError_t launch_backward_2d(const Problem2d& p, const void* q, Strides sq, const void* dout, Strides sd,
                               const void* out, Dtype dtype, const float* krows, const float* vrows, const float* lse,
                               void* dq, float* dkrows, float* dvrows, cudaStream_t stream) {
  if (!valid(p)) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward_typed(p, static_cast<const T*>(q), sq, static_cast<const T*>(dout), sd, static_cast<const T*>(out),
                          krows, vrows, lse, static_cast<T*>(dq), dkrows, dvrows, stream);
  });
}

}  // namespace xtrain::kernels::ms_attention::cuda
