// The CUDA multi-scale attention kernels' launchers: raw pointers, sizes, strides and a stream; no
// torch headers (STYLE.md rule 7). ms_attention_cuda.cpp converts tensors, allocates, checks.
// Design choice: one warp per query, walking its key ranges with ms_rules.h (the CPU's rules, the
// same dropout hash), online softmax in fp32; backward accumulates the pooled key/value gradients
// with fp32 atomics (so dK/dV sums are not bit-reproducible run to run) and pushes them down the
// levels afterwards. Untested on hardware in the session that wrote it: bench/gpu checks it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace xtrain::kernels::ms_attention::cuda {

enum class Dtype : int { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

constexpr int kMaxHeadSize = 256;  // 8 elements per lane
constexpr int kMaxWindows = 16;

// [B, NH, T, HS] element (b, h, t, e) at base + b*sb + h*sh + t*st + e.
struct Strides {
  int64_t sb = 0, sh = 0, st = 0;
};

struct Problem {
  int64_t B = 0, NH = 0, T = 0, HS = 0;
  int num_windows = 0;
  int64_t windows[kMaxWindows] = {};
  bool causal = true;
  double dropout = 0.0;
  uint64_t seed = 0;
};

// pooled [B·NH, total_rows(T), HS] fp32 from x (dtype, strided): level 0 copied, the rest as
// segment means, level by level.
cudaError_t launch_pool(const Problem& p, const void* x, Dtype dtype, Strides s, float* pooled, cudaStream_t stream);

// out [B, T, NH, HS] (dtype), lse [B·NH, T] fp32.
cudaError_t launch_forward(const Problem& p, const void* q, Strides sq, Dtype dtype, const float* kpool,
                           const float* vpool, void* out, float* lse, cudaStream_t stream);

// dq [B, T, NH, HS] (dtype, written); dkpool, dvpool [B·NH, rows, HS] fp32, zeroed by the caller,
// accumulated, then un-pooled in place: rows 0..T-1 of each head hold dk, dv on return.
// out: the forward output [B, T, NH, HS] (dtype); dout strided like q.
cudaError_t launch_backward(const Problem& p, const void* q, Strides sq, const void* dout, Strides sd,
                            const void* out, Dtype dtype, const float* kpool, const float* vpool, const float* lse,
                            void* dq, float* dkpool, float* dvpool, cudaStream_t stream);

}  // namespace xtrain::kernels::ms_attention::cuda
