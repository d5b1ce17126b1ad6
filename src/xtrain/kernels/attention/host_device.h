// XTRAIN_HD: marks the small pure functions (key-selection rules, the dropout hash) that the CPU
// kernels, the references and the CUDA kernels share, so every device computes the same thing.
// Plain C++ with no torch headers, so .cu files can include it (STYLE.md rule 7).
#pragma once

#if defined(__CUDACC__)
#define XTRAIN_HD __host__ __device__ __forceinline__
#else
#define XTRAIN_HD inline
#endif
