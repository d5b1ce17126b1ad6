// The CUDA 2-D multi-scale attention kernels' launchers (docs/design/multiscale-attention-2d.md):
// raw pointers, sizes, strides and a stream; no torch headers (STYLE.md rule 7).
// ms_attention_2d_cuda.cpp converts tensors, allocates, checks. Design choice: as the 1-D kernel,
// one warp per query walking its key set with ms_rules_2d.h (the CPU kernel's rule), online softmax
// in fp32, the same key-row layout as the CPU kernel (tokens, then levels 1..) and the same dropout
// mask (dropout_hash.h over strip_position_2d, key row); backward accumulates the key-row gradients
// with fp32 atomics and pushes them down the levels afterwards. Untested on hardware in the session
// that wrote it (compile-checked by nvcc only).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "xtrain/kernels/ms_attention/cuda/ms_attention_kernel.cuh"

namespace xtrain::kernels::ms_attention::cuda {

struct Problem2d {
  int64_t B = 0, NH = 0, T = 0, HS = 0;
  int64_t gh = 1, gw = 1;
  bool cls = false;  // token 0 is a class token; T = gh·gw + cls
  int num_windows = 0;
  int64_t windows[kMaxWindows] = {};
  int64_t strip_width = 8;  // the CPU kernel's query order, for the dropout hash
  double dropout = 0.0;
  uint64_t seed = 0;
};

// Key rows per head: the T tokens, then every level >= 1's blocks.
int64_t key_rows_2d(const Problem2d& p);

// rows [B·NH, key_rows_2d, HS] fp32 from x (dtype, strided): tokens copied, levels as block means.
cudaError_t launch_pool_2d(const Problem2d& p, const void* x, Dtype dtype, Strides s, float* rows,
                           cudaStream_t stream);

// out [B, T, NH, HS] (dtype), lse [B·NH, T] fp32 (token order).
cudaError_t launch_forward_2d(const Problem2d& p, const void* q, Strides sq, Dtype dtype, const float* krows,
                              const float* vrows, void* out, float* lse, cudaStream_t stream);

// dq [B, T, NH, HS] (dtype, written); dkrows, dvrows [B·NH, key_rows_2d, HS] fp32, zeroed by the
// caller, accumulated, then un-pooled in place: rows 0..T-1 of each head hold dk, dv on return.
cudaError_t launch_backward_2d(const Problem2d& p, const void* q, Strides sq, const void* dout, Strides sd,
                               const void* out, Dtype dtype, const float* krows, const float* vrows, const float* lse,
                               void* dq, float* dkrows, float* dvrows, cudaStream_t stream);

}  // namespace xtrain::kernels::ms_attention::cuda
