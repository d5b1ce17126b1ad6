#include "xtrain/federated/secure_agg.h"

#include <algorithm>
#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::federated {

namespace {
constexpr double kScale = 4294967296.0;  // 2^kFracBits
static_assert(kFracBits == 32, "kScale is 2^kFracBits");

uint64_t mix(uint64_t a, uint64_t b) {
  data::SplitMix64 r{a ^ (b * 0xd1b54a32d192ed03ULL)};
  return r.next();
}
}  // namespace

RingVector encode_fixed(const at::Tensor& x, int64_t clients) {
  const at::Tensor d = x.to(at::kDouble).contiguous();
  const double* p = d.data_ptr<double>();
  const double limit = std::ldexp(1.0, 62 - kFracBits) / static_cast<double>(std::max<int64_t>(1, clients));
  RingVector out(static_cast<size_t>(d.numel()));
  for (int64_t i = 0; i < d.numel(); ++i) {
    XTRAIN_USAGE_CHECK(std::isfinite(p[i]) && std::abs(p[i]) < limit, "--secure-agg: an update value ", p[i],
                       " is outside the fixed-point range (|x| < ", limit,
                       " for this many clients): lower the learning rate, or add --dp-clip to bound the updates");
    out[i] = static_cast<uint64_t>(static_cast<int64_t>(std::llround(p[i] * kScale)));
  }
  return out;
}

at::Tensor decode_fixed(const RingVector& v) {
  at::Tensor out = at::empty({static_cast<int64_t>(v.size())}, at::kDouble);
  double* p = out.data_ptr<double>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<double>(static_cast<int64_t>(v[i])) / kScale;
  return out;
}

uint64_t pair_seed(uint64_t key, int64_t round, int64_t i, int64_t j) {
  const auto lo = static_cast<uint64_t>(std::min(i, j)), hi = static_cast<uint64_t>(std::max(i, j));
  return mix(mix(mix(key, static_cast<uint64_t>(round)), lo), hi);
}

void add_mask(RingVector& v, uint64_t seed, bool subtract) {
  for (size_t k = 0; k < v.size(); ++k) {
    uint64_t z = seed + (static_cast<uint64_t>(k) + 1) * 0x9e3779b97f4a7c15ULL;  // splitmix64 at counter k
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    v[k] = subtract ? v[k] - z : v[k] + z;  // unsigned: wraps mod 2^64
  }
}

RingVector MaskingClient::mask(RingVector encoded, const std::vector<int64_t>& peers) const {
  for (int64_t j : peers) {
    if (j == id_) continue;
    add_mask(encoded, pair_seed(key_, round_, id_, j), /*subtract=*/j < id_);
  }
  return encoded;
}

void SecureAggregator::receive(int64_t client, RingVector masked) {
  TORCH_CHECK(static_cast<int64_t>(masked.size()) == length_, "secure aggregation: client ", client, " sent ",
              masked.size(), " values, want ", length_);
  TORCH_CHECK(!held_.count(client), "secure aggregation: client ", client, " sent twice");
  held_.emplace(client, std::move(masked));
}

RingVector SecureAggregator::unmasked_sum(const std::vector<int64_t>& dropped,
                                          const std::function<uint64_t(int64_t, int64_t)>& reveal) {
  RingVector sum(static_cast<size_t>(length_), 0);
  for (const auto& [id, v] : held_) {
    for (int64_t k = 0; k < length_; ++k) sum[k] += v[k];
  }
  // Survivor i's vector holds +PRG(s_id) for d > i and -PRG(s_id) for d < i: take it back out.
  for (int64_t d : dropped) {
    TORCH_CHECK(!held_.count(d), "secure aggregation: client ", d, " is both dropped and received");
    for (const auto& [i, v] : held_) {
      add_mask(sum, reveal(i, d), /*subtract=*/d > i);
      ++seeds_revealed_;
    }
  }
  return sum;
}

}  // namespace xtrain::federated
