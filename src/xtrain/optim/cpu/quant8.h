// Block-wise 8-bit quantisation of optimizer state (8-bit Adam, Dettmers et al. 2022) and the
// fused 8-bit Adam/AdamW block step. The code book is bitsandbytes' "dynamic" map
// (create_dynamic_map: a sign, a unary-coded decimal exponent 10^-6..10^0, then linear fraction
// bins over [0.1, 1] whose midpoints are the values, plus 0 and 1.0): the signed map (127
// negative, 0, 127 positive, 1.0) for exp_avg and the unsigned map ("udynamic": 254 positive, 0,
// 1.0) for exp_avg_sq. A block of kQuantBlock consecutive values is stored as one fp32 absmax and
// one byte per value: the index of the code nearest value/absmax in the sorted 256-entry map
// (exp_avg's as int8 = index - 128). Nearest: ties go towards zero; midpoints are rounded to fp32.
// Written from the paper and bitsandbytes' create_dynamic_map; no code of theirs is used.
#pragma once
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>

#include "xtrain/optim/cpu/kernels.h"

namespace xtrain::optim::cpu {

constexpr int64_t kQuantBlock = 2048;

inline int64_t quant_blocks(int64_t numel) { return (numel + kQuantBlock - 1) / kQuantBlock; }

// The sorted 256 codes of the signed or unsigned dynamic map, in fp32 (computed in double, rounded).
const std::array<float, 256>& dynamic_map(bool is_signed);

// Index in dynamic_map(is_signed) of the code nearest x (x normalised to [-1, 1] or [0, 1]).
uint8_t nearest_code(bool is_signed, float x);

// Whole blocks of x[0, n): absmax[b] = max |x| over block b, code[i] = nearest code of x[i]/absmax.
// Signed: codes are written as int8 (index - 128) into `codes`; unsigned: as uint8.
void quantize_blockwise(bool is_signed, const float* x, int64_t n, void* codes, float* absmax);
void dequantize_blockwise(bool is_signed, const void* codes, const float* absmax, int64_t n, float* out);

// The flat 8-bit Adam state and the buffers it steps (all indices absolute, as FlatBuffers).
struct Adam8bitBuffers {
  float* params = nullptr;
  const void* grads = nullptr;
  c10::ScalarType grad_type = c10::ScalarType::Float;
  int8_t* exp_avg = nullptr;       // signed-map codes, one per value
  uint8_t* exp_avg_sq = nullptr;   // unsigned-map codes
  float* exp_avg_absmax = nullptr;     // one per block
  float* exp_avg_sq_absmax = nullptr;  // one per block
  void* lowp = nullptr;
  c10::ScalarType lowp_type = c10::ScalarType::BFloat16;
  int64_t numel = 0;
};

// Elements [begin, end) of a block stepped with `coeffs` (one parameter group).
struct BlockRun {
  int64_t begin = 0, end = 0;
  const AdamCoeffs* coeffs = nullptr;
};

// One block: dequantise both moments of the block, run the Adam update (cpu::AdamCoeffs' formula,
// in fp32) over each run, take the new absmax of each moment and requantise the whole block.
// Elements of the block outside every run keep their value (requantised with the new absmax).
void adam8bit_block(const Adam8bitBuffers& b, int64_t block, const BlockRun* runs, int num_runs);

}  // namespace xtrain::optim::cpu
