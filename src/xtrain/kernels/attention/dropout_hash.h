// The attention-dropout mask as a pure function of (seed, head, query, key row): a counter-based
// hash (splitmix64's finaliser), so fused kernels regenerate the mask in backward instead of
// storing it, the CPU and CUDA kernels draw the same mask, and the references can apply it too.
// `stream` is the flat head index b*NH + h; `row` indexes the kernel's key rows (for multi-scale
// attention: the concatenated pooled levels). Reference: splitmix64 (Steele, Lea, Flood 2014).
#pragma once
#include <cstdint>

#include "xtrain/kernels/attention/host_device.h"

namespace xtrain::kernels::attention {

XTRAIN_HD uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 24 random bits per (seed, stream, query, row).
XTRAIN_HD uint32_t dropout_bits(uint64_t seed, uint64_t stream, uint64_t query, uint64_t row) {
  uint64_t x = mix64(seed + 0x9E3779B97F4A7C15ull * (stream + 1));
  x = mix64(x ^ (query * 0xD1B54A32D192ED03ull));
  x = mix64(x ^ (row * 0x8CB92BA72F3D8DD7ull));
  return static_cast<uint32_t>(x >> 40);
}

// Bits below this threshold are dropped: probability p, in steps of 2^-24.
XTRAIN_HD uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(p * 16777216.0 + 0.5); }

XTRAIN_HD bool dropout_keep(uint64_t seed, uint64_t stream, uint64_t query, uint64_t row, uint32_t threshold) {
  return dropout_bits(seed, stream, query, row) >= threshold;
}

}  // namespace xtrain::kernels::attention
