// splitmix64 (Steele et al., "Fast splittable pseudorandom number generators", 2014): the one
// random stream of data/ — a sample order is a function of (seed, epoch) alone, the same on every
// platform and LibTorch version, and reproducible in ten lines of Python (tests/data/sampler_test.cpp).
#pragma once
#include <cstdint>

namespace xtrain::data {

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias: reject the first 2^64 mod n values.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t x = next();
      if (x >= threshold) return x % n;
    }
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

// The stream for one epoch: seeded with a splitmix64 hash of (seed, epoch).
inline uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  SplitMix64 mix{seed};
  const uint64_t a = mix.next();
  SplitMix64 mix_epoch{a ^ uint64_t(epoch)};
  return mix_epoch.next();
}

}  // namespace xtrain::data
