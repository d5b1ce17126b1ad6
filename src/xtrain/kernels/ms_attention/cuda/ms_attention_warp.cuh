// What the 1-D and 2-D multi-scale attention kernels share; above all the per-query warp bodies
// (one warp per query, each lane holding HS/32 of its elements): the forward's online softmax over
// the key rows the query sees, and the backward's dq with fp32 atomics into dK/dV. The two kernels
// differ only in the problem type, which key rows a query visits (with their log-size bias) and the
// dropout mask's query index, so those come in as callables; the arithmetic, and its order, exists
// once here. For the .cu files only (no torch headers, STYLE.md rule 7).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "xtrain/kernels/attention/dropout_hash.h"
#include "xtrain/kernels/ms_attention/cuda/ms_attention_kernel.cuh"

namespace xtrain::kernels::ms_attention::cuda {

constexpr int kWarp = 32;
constexpr int kPerLane = kMaxHeadSize / kWarp;
constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The factor a kept weight is multiplied by when dropout is on (0 when dropped): the CPU kernels'
// mask (dropout_hash.h) at (query, key row) of head `stream`.
__device__ __forceinline__ float dropout_keep_factor(double dropout, uint64_t seed, uint64_t stream, int64_t query,
                                                     int64_t row) {
  const bool keep = attention::dropout_keep(seed, stream, static_cast<uint64_t>(query), static_cast<uint64_t>(row),
                                            attention::dropout_threshold(dropout));
  return keep ? static_cast<float>(1.0 / (1.0 - dropout)) : 0.f;
}

// x (T, strided [B, NH, T, HS]) into rows 0..T-1 of each head of out [B·NH, rows, HS] fp32: the
// 1-D kernel's level 0, the 2-D kernel's tokens. P is Problem or Problem2d.
template <typename T, class P>
__global__ void copy_tokens_kernel(P p, const T* __restrict__ x, Strides s, int64_t rows, float* out) {
  const int64_t total = p.B * p.NH * p.T * p.HS;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx % p.HS, t = (idx / p.HS) % p.T, bh = idx / (p.HS * p.T);
    const int64_t b = bh / p.NH, h = bh % p.NH;
    out[(bh * rows + t) * p.HS + e] = to_float(x[b * s.sb + h * s.sh + t * s.st + e]);
  }
}

// Blocks of `threads` for an element-parallel loop over `work` items (grid-stride beyond the cap).
inline int grid_for(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<int>(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1) : 65535 * 32);
}

// Blocks of kWarpsPerBlock warps for one warp per query (B·NH·T of them).
template <class P>
int warp_grid(const P& p) {
  return static_cast<int>((p.B * p.NH * p.T + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// f(T{}) for the element type T of dtype, returning what f returns; an unknown dtype is invalid.
template <class F>
cudaError_t dispatch_dtype(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::kFloat32: return f(float{});
    case Dtype::kBFloat16: return f(__nv_bfloat16{});
    case Dtype::kFloat16: return f(__half{});
  }
  return cudaErrorInvalidValue;
}

// The forward of this warp's query (b, h, i): q [B, NH, T, HS] strided, key/value rows
// [B·NH, rows, HS] fp32, out [B, T, NH, HS], lse [B·NH, T]. for_rows(h, i, f) calls f(row, bias)
// for every key row the query sees, in the kernel's order; drop(bh, i, row) is the dropout factor.
template <typename T, class P, class Rows, class Drop>
__device__ __forceinline__ void forward_query(const P& p, const T* __restrict__ q, Strides sq,
                                              const float* __restrict__ krows, const float* __restrict__ vrows,
                                              int64_t rows, T* __restrict__ out, float* lse, Rows&& for_rows,
                                              Drop&& drop) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (warp >= p.B * p.NH * p.T) return;
  const int64_t bh = warp / p.T, i = warp % p.T, b = bh / p.NH, h = bh % p.NH;
  const float scale = rsqrtf(static_cast<float>(p.HS));
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t e = lane + kWarp * t;
    qv[t] = e < p.HS ? to_float(q[b * sq.sb + h * sq.sh + i * sq.st + e]) * scale : 0.f;
    acc[t] = 0.f;
  }
  const float* K = krows + bh * rows * p.HS;
  const float* V = vrows + bh * rows * p.HS;
  float m = -INFINITY, l = 0.f;
  for_rows(h, i, [&](int64_t row, float bias) {
    float part = 0.f;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t e = lane + kWarp * t;
      if (e < p.HS) part += qv[t] * K[row * p.HS + e];
    }
    const float s = warp_sum(part) + bias;
    const float mnew = fmaxf(m, s);
    const float alpha = expf(m - mnew), pe = expf(s - mnew);
    l = l * alpha + pe;
    const float pz = pe * drop(static_cast<uint64_t>(bh), i, row);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t e = lane + kWarp * t;
      acc[t] = acc[t] * alpha + (e < p.HS ? pz * V[row * p.HS + e] : 0.f);
    }
    m = mnew;
  });
  T* o = out + ((b * p.T + i) * p.NH + h) * p.HS;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t e = lane + kWarp * t;
    if (e < p.HS) o[e] = from_float<T>(acc[t] / l);
  }
  if (lane == 0) lse[bh * p.T + i] = m + logf(l);
}

// The backward of this warp's query: dq written ([B, T, NH, HS]); dK, dV rows [B·NH, rows, HS]
// accumulated with atomics. dout strided like q; out and lse are the forward's. for_rows and drop
// as in forward_query.
template <typename T, class P, class Rows, class Drop>
__device__ __forceinline__ void backward_query(const P& p, const T* __restrict__ q, Strides sq,
                                               const T* __restrict__ dout, Strides sd, const T* __restrict__ out,
                                               const float* __restrict__ krows, const float* __restrict__ vrows,
                                               const float* __restrict__ lse, int64_t rows, T* __restrict__ dq,
                                               float* dkrows, float* dvrows, Rows&& for_rows, Drop&& drop) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (warp >= p.B * p.NH * p.T) return;
  const int64_t bh = warp / p.T, i = warp % p.T, b = bh / p.NH, h = bh % p.NH;
  const float scale = rsqrtf(static_cast<float>(p.HS));
  const T* o = out + ((b * p.T + i) * p.NH + h) * p.HS;
  float qv[kPerLane], dov[kPerLane], dqa[kPerLane], dot_o = 0.f;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t e = lane + kWarp * t;
    const bool in = e < p.HS;
    qv[t] = in ? to_float(q[b * sq.sb + h * sq.sh + i * sq.st + e]) * scale : 0.f;
    dov[t] = in ? to_float(dout[b * sd.sb + h * sd.sh + i * sd.st + e]) : 0.f;
    dot_o += in ? dov[t] * to_float(o[e]) : 0.f;
    dqa[t] = 0.f;
  }
  const float delta = warp_sum(dot_o), L = lse[bh * p.T + i];
  const float* K = krows + bh * rows * p.HS;
  const float* V = vrows + bh * rows * p.HS;
  float* dK = dkrows + bh * rows * p.HS;
  float* dV = dvrows + bh * rows * p.HS;
  for_rows(h, i, [&](int64_t row, float bias) {
    float s_part = 0.f, dp_part = 0.f;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t e = lane + kWarp * t;
      if (e < p.HS) {
        s_part += qv[t] * K[row * p.HS + e];
        dp_part += dov[t] * V[row * p.HS + e];
      }
    }
    const float pe = expf(warp_sum(s_part) + bias - L);
    const float z = drop(static_cast<uint64_t>(bh), i, row);
    const float ds = pe * (z * warp_sum(dp_part) - delta);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t e = lane + kWarp * t;
      if (e < p.HS) {
        dqa[t] += ds * K[row * p.HS + e];
        atomicAdd(dK + row * p.HS + e, ds * qv[t]);
        atomicAdd(dV + row * p.HS + e, pe * z * dov[t]);
      }
    }
  });
  T* g = dq + ((b * p.T + i) * p.NH + h) * p.HS;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t e = lane + kWarp * t;
    if (e < p.HS) g[e] = from_float<T>(dqa[t] * scale);
  }
}

}  // namespace xtrain::kernels::ms_attention::cuda
