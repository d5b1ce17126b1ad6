// Fused Adam/AdamW on CUDA (see adamw_kernel.cuh): one pass per element, grid-stride loop, four
// elements per thread with 16-byte fp32 loads (8-byte for bf16/fp16) when the pointers are aligned,
// a scalar variant otherwise. bf16 stores round to nearest even with NaN -> 0x7FC0, exactly as
// c10::BFloat16 and the CPU kernel; __fmul_rn/__fadd_rn/__fmaf_rn fix the rounding of every step.
#include "xtrain/optim/cuda/adamw_kernel.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace xtrain::optim::cuda {

namespace {

struct Bf16 {
  uint16_t bits;
};
struct Fp16 {
  uint16_t bits;
};
struct NoLowp {};

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(Bf16 x) { return __uint_as_float(static_cast<uint32_t>(x.bits) << 16); }
__device__ __forceinline__ float to_float(Fp16 x) { return __half2float(__ushort_as_half(x.bits)); }

__device__ __forceinline__ void store_lowp(Bf16* out, float x) {
  const uint32_t u = __float_as_uint(x);
  out->bits = x != x ? uint16_t{0x7FC0} : static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ void store_lowp(Fp16* out, float x) { out->bits = __half_as_ushort(__float2half_rn(x)); }
__device__ __forceinline__ void store_lowp(NoLowp*, float) {}

// One element, in the CPU kernel's order (ATen's add-with-alpha and addcmul are FMAs).
__device__ __forceinline__ float adam_element(const AdamCoeffs& c, float p, float g, float& m, float& v) {
  g = __fmul_rn(g, c.grad_scale);
  if (c.l2 != 0.f) g = __fmaf_rn(p, c.l2, g);
  m = __fmaf_rn(g, c.one_minus_beta1, __fmul_rn(m, c.beta1));
  v = __fmaf_rn(__fmul_rn(c.one_minus_beta2, g), g, __fmul_rn(v, c.beta2));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bc2_sqrt), c.eps);
  p = __fmul_rn(p, c.decay_mul);
  return __fadd_rn(p, __fdiv_rn(__fmul_rn(c.neg_step_size, m), denom));
}

template <typename G, typename L>
__global__ void adam_scalar_kernel(AdamCoeffs c, float* __restrict__ p, const G* __restrict__ g,
                                   float* __restrict__ m, float* __restrict__ v, L* __restrict__ lowp, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float pi = adam_element(c, p[i], to_float(g[i]), mi, vi);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    store_lowp(lowp + i, pi);
  }
}

// Four consecutive elements of a 16-bit or 32-bit array, loaded with one vector access.
template <typename T>
struct alignas(sizeof(T) * 4) Pack4 {
  T x[4];
};

template <typename G, typename L>
__global__ void adam_vec4_kernel(AdamCoeffs c, float4* __restrict__ p, const Pack4<G>* __restrict__ g,
                                 float4* __restrict__ m, float4* __restrict__ v, Pack4<L>* __restrict__ lowp,
                                 int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float4 pv = p[i], mv = m[i], vv = v[i];
    const Pack4<G> gv = g[i];
    float* pf = &pv.x;
    float* mf = &mv.x;
    float* vf = &vv.x;
    Pack4<L> out;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      pf[k] = adam_element(c, pf[k], to_float(gv.x[k]), mf[k], vf[k]);
      store_lowp(&out.x[k], pf[k]);
    }
    p[i] = pv;
    m[i] = mv;
    v[i] = vv;
    if (lowp != nullptr) lowp[i] = out;
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }
bool aligned8(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 8 == 0; }

int grid_for(int64_t work, int threads) {
  int device = 0, sms = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t{sms} * 16)));
}

template <typename G, typename L>
cudaError_t launch_typed(const AdamCoeffs& c, float* p, const G* g, float* m, float* v, L* lowp, int64_t n,
                         cudaStream_t stream) {
  constexpr int kThreads = 256;
  const bool lowp_ok = lowp == nullptr || (sizeof(L) == 1 || aligned8(lowp));
  const bool vec = aligned16(p) && aligned16(m) && aligned16(v) && (sizeof(G) == 4 ? aligned16(g) : aligned8(g)) && lowp_ok;
  const int64_t n4 = vec ? n / 4 : 0;
  if (n4 > 0) {
    adam_vec4_kernel<G, L><<<grid_for(n4, kThreads), kThreads, 0, stream>>>(
        c, reinterpret_cast<float4*>(p), reinterpret_cast<const Pack4<G>*>(g), reinterpret_cast<float4*>(m),
        reinterpret_cast<float4*>(v), reinterpret_cast<Pack4<L>*>(lowp), n4);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  const int64_t done = n4 * 4, rest = n - done;
  if (rest > 0) {
    adam_scalar_kernel<G, L><<<grid_for(rest, kThreads), kThreads, 0, stream>>>(
        c, p + done, g + done, m + done, v + done, lowp == nullptr ? nullptr : lowp + done, rest);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

template <typename G>
cudaError_t launch_lowp(const AdamCoeffs& c, float* p, const G* g, float* m, float* v, void* lowp, Dtype lowp_type,
                        int64_t n, cudaStream_t stream) {
  switch (lowp_type) {
    case Dtype::kBFloat16: return launch_typed(c, p, g, m, v, static_cast<Bf16*>(lowp), n, stream);
    case Dtype::kFloat16: return launch_typed(c, p, g, m, v, static_cast<Fp16*>(lowp), n, stream);
    case Dtype::kNone: return launch_typed(c, p, g, m, v, static_cast<NoLowp*>(nullptr), n, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_adam(const AdamCoeffs& c, float* params, const void* grads, Dtype grad_type, float* exp_avg,
                        float* exp_avg_sq, void* lowp, Dtype lowp_type, int64_t numel, cudaStream_t stream) {
  if (numel <= 0) return cudaSuccess;
  if (lowp_type != Dtype::kNone && lowp == nullptr) return cudaErrorInvalidValue;
  switch (grad_type) {
    case Dtype::kFloat32:
      return launch_lowp(c, params, static_cast<const float*>(grads), exp_avg, exp_avg_sq, lowp, lowp_type, numel, stream);
    case Dtype::kBFloat16:
      return launch_lowp(c, params, static_cast<const Bf16*>(grads), exp_avg, exp_avg_sq, lowp, lowp_type, numel, stream);
    case Dtype::kFloat16:
      return launch_lowp(c, params, static_cast<const Fp16*>(grads), exp_avg, exp_avg_sq, lowp, lowp_type, numel, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace xtrain::optim::cuda
