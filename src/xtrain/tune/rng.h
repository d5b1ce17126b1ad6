// Deterministic random numbers for the samplers: SplitMix64 derives a stream from (seed, stream)
// (stream = the trial number, so a resumed study draws what an uninterrupted one would), and
// xoshiro256** draws from it. Our own uniform/normal rather than <random>'s distributions, whose
// output is implementation-defined: a seed gives the same proposals with every standard library.
#pragma once
#include <cmath>
#include <cstdint>

namespace xtrain::tune {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0) {
    uint64_t st = seed ^ (0x6a09e667f3bcc909ULL * (stream + 1));
    for (auto& s : s_) s = splitmix64(st);
  }
  uint64_t next() {  // xoshiro256** (Blackman & Vigna 2018)
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal() {                     // Box–Muller; one value per call keeps the stream position simple
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  int64_t integer(int64_t n) { return static_cast<int64_t>(uniform() * static_cast<double>(n)); }  // [0, n)

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace xtrain::tune
