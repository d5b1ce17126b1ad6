// The CPU attention tile engine that both fused kernels (dense flash-style and multi-scale) run on:
// one query block against a list of key tiles, forward with an online softmax (running max and sum,
// rescaled per tile) and backward from the saved log-sum-exp. Design choice: a kernel is only a
// tile planner (which key rows each query block sees, as [lo, hi) ranges per tile); the GEMM
// micro-kernels, softmax and dropout are written once, per ISA (AVX-512, AVX2, scalar; fp64 runs
// the scalar code for gradcheck). Reference: FlashAttention-2 (Dao 2023), Algorithms 1 and 2.
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/base/cpu_isa.h"

namespace xtrain::kernels::attention::cpu {

using base::Isa;
using base::isa_name;
Isa best_isa();
Isa active_isa();
Isa force_isa(Isa isa);  // tests and benchmarks; must be <= best_isa(); returns the previous one

// Rows [row0, row0 + rows) of one head's key arrays, seen by one query block. Query q of the block
// sees rows [row0 + lo[q], row0 + hi[q]) (lo == hi: none); lo and hi hold a whole number of 16-lane
// vectors (lanes past the block's queries are 0). `group` and `local` place the tile in a backward
// chunk's private dK/dV buffer (see fused_driver.h).
struct Tile {
  int64_t row0 = 0;
  int32_t rows = 0;
  int32_t group = 0;
  int64_t local = 0;
  const int32_t* lo = nullptr;
  const int32_t* hi = nullptr;
};

// One head's keys and values, already in the compute type T (float or double).
template <typename T>
struct HeadKeys {
  const T* k = nullptr;  // [rows][d]
  const T* v = nullptr;  // [rows][d]
  const T* bias = nullptr;  // [rows], added to every score; nullptr: none
  int64_t d = 0;
};

struct DropoutArgs {
  double p = 0;          // 0: off
  uint64_t seed = 0;
  uint64_t stream = 0;   // flat head index b*NH + h
};

template <typename T>
struct BlockArgs {
  const T* q = nullptr;  // [m][d] (row stride ldq), already scaled by 1/sqrt(d)
  int64_t ldq = 0;
  int32_t m = 0;
  int64_t query0 = 0;  // index of the block's first query (dropout counter)
  const Tile* tiles = nullptr;
  int ntiles = 0;
  int64_t batch_cols = 512;  // tiles are scored together up to this many key rows (one softmax update)
  HeadKeys<T> keys;
  DropoutArgs dropout;
  // forward outputs
  T* o = nullptr;  // [m][d], row stride ldo
  int64_t ldo = 0;
  T* lse = nullptr;  // [m]
  // backward inputs and outputs
  const T* dout = nullptr;  // [m][d], row stride lddo
  int64_t lddo = 0;
  const T* lse_in = nullptr;  // [m]
  const T* delta = nullptr;   // [m]: rowsum(dout * o)
  T* dq = nullptr;            // [m][d], row stride lddq, written (scaled by dq_scale)
  int64_t lddq = 0;
  T dq_scale = 1;
  T* dk_local = nullptr;  // [local rows][d], accumulated
  T* dv_local = nullptr;
};

// `scratch` grows as needed; one per thread.
void forward_block(const BlockArgs<float>& a, std::vector<float>& scratch);
void forward_block(const BlockArgs<double>& a, std::vector<double>& scratch);
void backward_block(const BlockArgs<float>& a, std::vector<float>& scratch);
void backward_block(const BlockArgs<double>& a, std::vector<double>& scratch);

}  // namespace xtrain::kernels::attention::cpu
