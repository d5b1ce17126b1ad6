// The dynamic maps, block quantisation and the fused 8-bit Adam block (quant8.h). The block body
// is plain loops compiled twice, for the baseline ISA and for AVX2 (picked at run time), that the
// compiler vectorises: src/CMakeLists.txt builds this file with -O3 -fno-math-errno (sqrt inline)
// -ffp-contract=off (no FMA contraction, so both variants give the same bits).
#include "xtrain/optim/cpu/quant8.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "xtrain/base/cpu_isa.h"
#include "xtrain/optim/cpu/typed_buffers.h"


namespace xtrain::optim::cpu {
namespace {

// The nearest code of x >= 0 among the non-negative codes pos[0..P) (0, ..., 1.0) is the number of
// midpoints below x. Bucketing x by its top float bits (exponent and 8 mantissa bits: 2^-8 relative
// width, narrower than the map's tightest spacing, 0.7%) leaves at most one midpoint per bucket:
// first[b] counts the midpoints below bucket b, and one comparison finishes the count.
constexpr int kBucketShift = 15;                   // 23 mantissa bits - 8 kept
constexpr uint32_t kLowestBucket = (127 - 30) << 8;  // buckets start at 2^-30; smaller x share bucket 0
constexpr int kBuckets = (30 << 8) + 1;              // up to x = 1.0

struct Map {
  std::array<float, 256> codes{};
  std::array<float, 256> mids{};  // mids[j] between codes j and j+1; mids[255] = +inf
  // The non-negative half: midpoints between consecutive codes >= 0, and the buckets.
  std::array<float, 257> pos_mids{};
  std::array<int32_t, kBuckets> first{};  // int32: the vectorised loops gather it
  int zero = 0;  // index of the code 0
};

inline __attribute__((always_inline)) int bucket_of(float x) {
  const uint32_t key = __builtin_bit_cast(uint32_t, x) >> kBucketShift;
  return key <= kLowestBucket ? 0 : static_cast<int>(std::min<uint32_t>(key - kLowestBucket, kBuckets - 1));
}

float bucket_low(int b) {  // the smallest x of bucket b (0 for bucket 0)
  if (b == 0) return 0.f;
  const uint32_t bits = (static_cast<uint32_t>(b) + kLowestBucket) << kBucketShift;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

void build_buckets(Map& m) {
  while (m.codes[m.zero] != 0.f) ++m.zero;
  const int P = 256 - m.zero;  // codes 0 .. 1.0
  for (int j = 0; j + 1 < P; ++j) m.pos_mids[j] = m.mids[m.zero + j];
  for (int j = P - 1; j < 257; ++j) m.pos_mids[j] = INFINITY;
  int below = 0;
  for (int b = 0; b < kBuckets; ++b) {
    const float lo = bucket_low(b), hi = b + 1 < kBuckets ? bucket_low(b + 1) : INFINITY;
    while (below < P - 1 && m.pos_mids[below] < lo) ++below;
    m.first[b] = below;
    // At most one midpoint in [lo, hi): one comparison decides.
    TORCH_INTERNAL_ASSERT(b == 0 || !(m.pos_mids[below + 1] < hi), "quant8: two midpoints in bucket ", b);
  }
}

// bitsandbytes' create_dynamic_map(signed, max_exponent_bits = 7, total_bits = 8): for exponent
// i = 0..6, the midpoints of linspace(0.1, 1, k + 1) scaled by 10^(i-6), k = 2^i (signed, both
// signs) or 2^(i+1) (unsigned); then 0 and 1.0.
Map build_map(bool is_signed) {
  std::vector<double> v;
  for (int i = 0; i < 7; ++i) {
    const int k = is_signed ? (1 << i) : (1 << (i + 1));
    const double scale = std::pow(10.0, i - 6);
    for (int j = 0; j < k; ++j) {
      const double lo = 0.1 + 0.9 * j / k, hi = 0.1 + 0.9 * (j + 1) / k;
      v.push_back(scale * (lo + hi) / 2);
      if (is_signed) v.push_back(-scale * (lo + hi) / 2);
    }
  }
  v.push_back(0.0);
  v.push_back(1.0);
  TORCH_INTERNAL_ASSERT(v.size() == 256);
  std::sort(v.begin(), v.end());
  Map m;
  for (int j = 0; j < 256; ++j) m.codes[j] = static_cast<float>(v[j]);
  for (int j = 0; j < 255; ++j) m.mids[j] = static_cast<float>((v[j] + v[j + 1]) / 2);
  m.mids[255] = INFINITY;
  build_buckets(m);
  return m;
}

const Map& map_of(bool is_signed) {
  static const Map s = build_map(true), u = build_map(false);
  return is_signed ? s : u;
}

// The index of the code nearest x (ties towards zero). Negative x (signed map) mirror the positive
// codes, which have one more (1.0) than the negative ones.
inline __attribute__((always_inline)) int nearest(const Map& m, float x) {
  const float a = std::fabs(x);
  const int first = m.first[bucket_of(a)];
  const int pos = first + (a > m.pos_mids[first] ? 1 : 0);
  return x < 0 ? m.zero - std::min(pos, m.zero) : m.zero + pos;
}

// index[i] = nearest(m, x[i] / d) for i < n, eight at a time: the same integer and comparison steps
// as nearest() (so the same codes), with gathers for the two table lookups.
__attribute__((target("avx2"))) void nearest_avx2(const Map& m, const float* x, float d, int64_t n, int32_t* index) {
  const __m256 vd = _mm256_set1_ps(d), zero_f = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lowest = _mm256_set1_epi32(static_cast<int>(kLowestBucket)), top = _mm256_set1_epi32(kBuckets - 1);
  const __m256i zero_code = _mm256_set1_epi32(m.zero), zero_i = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_div_ps(_mm256_loadu_ps(x + i), vd);
    const __m256 a = _mm256_and_ps(xv, abs_mask);
    __m256i b = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(a), kBucketShift), lowest);
    b = _mm256_min_epi32(_mm256_max_epi32(b, zero_i), top);
    const __m256i first = _mm256_i32gather_epi32(m.first.data(), b, 4);
    const __m256 mid = _mm256_i32gather_ps(m.pos_mids.data(), first, 4);
    const __m256i pos = _mm256_sub_epi32(first, _mm256_castps_si256(_mm256_cmp_ps(a, mid, _CMP_GT_OQ)));
    const __m256i neg = _mm256_sub_epi32(zero_code, _mm256_min_epi32(pos, zero_code));
    const __m256 is_neg = _mm256_cmp_ps(xv, zero_f, _CMP_LT_OQ);
    const __m256i idx = _mm256_blendv_epi8(_mm256_add_epi32(zero_code, pos), neg, _mm256_castps_si256(is_neg));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(index + i), idx);
  }
  for (; i < n; ++i) index[i] = nearest(m, x[i] / d);
}

// max |x[i]|, through the bits: non-negative floats order as their uint32 patterns (vectorises).
inline __attribute__((always_inline)) float max_abs(const float* x, int64_t n) {
  uint32_t top = 0;
  for (int64_t i = 0; i < n; ++i) top = std::max(top, __builtin_bit_cast(uint32_t, x[i]) & 0x7fffffffu);
  return __builtin_bit_cast(float, top);
}

template <class G, class L>
inline __attribute__((always_inline)) void adam_run(const AdamCoeffs& c, int64_t n, float* p, const G* g, float* m,
                                                    float* v, L* lowp) {
  for (int64_t i = 0; i < n; ++i) {
    float gv = static_cast<float>(g[i]) * c.grad_scale;
    if (c.l2 != 0) gv = p[i] * c.l2 + gv;
    const float mv = gv * c.one_minus_beta1 + m[i] * c.beta1;
    const float vv = (c.one_minus_beta2 * gv) * gv + v[i] * c.beta2;
    const float denom = std::sqrt(vv) / c.bc2_sqrt + c.eps;
    const float pv = p[i] * c.decay_mul + (c.neg_step_size * mv) / denom;
    m[i] = mv;
    v[i] = vv;
    p[i] = pv;
    if (lowp != nullptr) lowp[i] = static_cast<L>(pv);
  }
}

template <bool kAvx2>
inline __attribute__((always_inline)) void block_body(const Adam8bitBuffers& b, int64_t block, const BlockRun* runs,
                                                      int num_runs) {
  const Map& sm = map_of(true);
  const Map& um = map_of(false);
  const int64_t lo = block * kQuantBlock, n = std::min(kQuantBlock, b.numel - lo);
  alignas(64) float m[kQuantBlock];
  alignas(64) float v[kQuantBlock];
  const float ma = b.exp_avg_absmax[block], va = b.exp_avg_sq_absmax[block];
  const int8_t* mc = b.exp_avg + lo;
  const uint8_t* vc = b.exp_avg_sq + lo;
  for (int64_t i = 0; i < n; ++i) m[i] = sm.codes[static_cast<uint8_t>(mc[i] + 128)] * ma;
  for (int64_t i = 0; i < n; ++i) v[i] = um.codes[vc[i]] * va;
  for (int r = 0; r < num_runs; ++r) {
    const BlockRun& run = runs[r];
    const AdamCoeffs c = *run.coeffs;
    with_typed_buffers(b, run.begin, [&](const auto* g, auto* lowp) {
      adam_run(c, run.end - run.begin, b.params + run.begin, g, m + (run.begin - lo), v + (run.begin - lo), lowp);
    });
  }
  const float new_ma = max_abs(m, n), new_va = max_abs(v, n);
  // Divided, not multiplied by 1/absmax: a subnormal absmax has no finite reciprocal.
  const float md = new_ma > 0 ? new_ma : 1.f, vd = new_va > 0 ? new_va : 1.f;
  int8_t* mo = b.exp_avg + lo;
  uint8_t* vo = b.exp_avg_sq + lo;
  alignas(64) int32_t index[kQuantBlock];
  if constexpr (kAvx2) {
    nearest_avx2(sm, m, md, n, index);
  } else {
    for (int64_t i = 0; i < n; ++i) index[i] = nearest(sm, m[i] / md);
  }
  for (int64_t i = 0; i < n; ++i) mo[i] = static_cast<int8_t>(index[i] - 128);
  if constexpr (kAvx2) {
    nearest_avx2(um, v, vd, n, index);
  } else {
    for (int64_t i = 0; i < n; ++i) index[i] = nearest(um, v[i] / vd);
  }
  for (int64_t i = 0; i < n; ++i) vo[i] = static_cast<uint8_t>(index[i]);
  b.exp_avg_absmax[block] = new_ma;
  b.exp_avg_sq_absmax[block] = new_va;
}

void block_baseline(const Adam8bitBuffers& b, int64_t block, const BlockRun* runs, int num_runs) {
  block_body<false>(b, block, runs, num_runs);
}

__attribute__((target("avx2,f16c"))) void block_avx2(const Adam8bitBuffers& b, int64_t block, const BlockRun* runs,
                                                     int num_runs) {
  block_body<true>(b, block, runs, num_runs);
}

}  // namespace

const std::array<float, 256>& dynamic_map(bool is_signed) { return map_of(is_signed).codes; }

uint8_t nearest_code(bool is_signed, float x) { return static_cast<uint8_t>(nearest(map_of(is_signed), x)); }

void quantize_blockwise(bool is_signed, const float* x, int64_t n, void* codes, float* absmax) {
  const Map& map = map_of(is_signed);
  auto* out = static_cast<uint8_t*>(codes);
  for (int64_t lo = 0, blk = 0; lo < n; lo += kQuantBlock, ++blk) {
    const int64_t hi = std::min(n, lo + kQuantBlock);
    float a = 0.f;
    for (int64_t i = lo; i < hi; ++i) a = std::max(a, std::fabs(x[i]));
    absmax[blk] = a;
    const float d = a > 0 ? a : 1.f;  // as the kernel: divided (a subnormal absmax has no finite 1/a)
    for (int64_t i = lo; i < hi; ++i) {
      const int code = nearest(map, x[i] / d);
      out[i] = static_cast<uint8_t>(is_signed ? code - 128 : code);  // int8 two's complement of index - 128
    }
  }
}

void dequantize_blockwise(bool is_signed, const void* codes, const float* absmax, int64_t n, float* out) {
  const Map& map = map_of(is_signed);
  const auto* in = static_cast<const uint8_t*>(codes);
  for (int64_t i = 0; i < n; ++i) {
    const int index = is_signed ? static_cast<uint8_t>(static_cast<int8_t>(in[i]) + 128) : in[i];
    out[i] = map.codes[index] * absmax[i / kQuantBlock];
  }
}

void adam8bit_block(const Adam8bitBuffers& b, int64_t block, const BlockRun* runs, int num_runs) {
  static const bool avx2 = base::best_cpu_isa() >= base::Isa::kAvx2;
  if (avx2) {
    block_avx2(b, block, runs, num_runs);
  } else {
    block_baseline(b, block, runs, num_runs);
  }
}

}  // namespace xtrain::optim::cpu
