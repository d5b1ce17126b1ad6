// Secure aggregation as Bonawitz et al. (CCS 2017) build it, simulated in one process with the
// server's view kept honest: the server (SecureAggregator) only ever receives masked vectors and
// learns their sum.
//
// Values live in the ring Z_2^64 as fixed-point numbers with kFracBits fractional bits. A ring, not
// float64, because (1) a mask drawn uniformly from the ring makes each masked vector uniformly
// distributed whatever the update (a float mask of any finite spread leaks the update's magnitude),
// and (2) ring addition is exact, so the masks cancel bit for bit: the only error is the rounding
// of each value to 2^-kFracBits (at most 2^-(kFracBits+1) per client and coordinate, before the
// server divides by the total weight). Values must stay below 2^(63 - kFracBits) in magnitude,
// summed over the clients of a round (checked when encoding).
//
// Masks: every pair (i, j) of a round's clients shares a seed s_ij (in a deployment, a Diffie-Hellman
// agreement; here derived from a key the clients hold and the server never sees, the round and the
// pair). Client i adds PRG(s_ij) for every peer j > i and subtracts it for j < i; over all clients
// each PRG(s_ij) enters once with + and once with -, so the sum is the sum of the true vectors.
// Dropout: when client d's masked vector never arrives (it dropped after masking), the survivors'
// vectors hold the masks they share with d unmatched; each survivor i reveals s_id and the server
// removes +-PRG(s_id) itself. The sum is then the survivors' true sum. (The full protocol also
// secret-shares each client's own self-mask so that a late-arriving d cannot be unmasked; with no
// late arrivals in this simulation that layer is left out.)
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace xtrain::federated {

constexpr int kFracBits = 32;
using RingVector = std::vector<uint64_t>;

// round(x * 2^kFracBits) mod 2^64, for a 1-D tensor (any floating dtype, read as double).
// UsageError when a value is not finite or |x| >= 2^(62 - kFracBits) / `clients` (the sum of
// `clients` such values could leave the ring's signed range).
RingVector encode_fixed(const at::Tensor& x, int64_t clients);
// The signed fixed-point values as a float64 tensor.
at::Tensor decode_fixed(const RingVector& v);

// The seed pair (i, j) shares in a round: a splitmix64 hash of (key, round, min, max).
uint64_t pair_seed(uint64_t key, int64_t round, int64_t i, int64_t j);
// v += PRG(seed) (or -=), element-wise in Z_2^64; PRG(seed)[k] is splitmix64 of the counter k.
void add_mask(RingVector& v, uint64_t seed, bool subtract);

// One client's side: its id, the round, and the key it shares with its peers.
class MaskingClient {
 public:
  MaskingClient(int64_t id, int64_t round, uint64_t key) : id_(id), round_(round), key_(key) {}
  // The encoded update plus PRG(s_ij) for each peer j > id, minus it for j < id (`peers`: every
  // client sampled this round; the client's own id is skipped).
  RingVector mask(RingVector encoded, const std::vector<int64_t>& peers) const;
  // s_{id, dropped}: what this survivor reveals about a peer that dropped.
  uint64_t reveal(int64_t dropped) const { return pair_seed(key_, round_, id_, dropped); }

 private:
  int64_t id_, round_;
  uint64_t key_;
};

// The server's side: holds masked vectors only, and the seeds survivors reveal for dropped peers.
class SecureAggregator {
 public:
  explicit SecureAggregator(int64_t length) : length_(length) {}
  void receive(int64_t client, RingVector masked);
  const std::map<int64_t, RingVector>& held() const { return held_; }
  // The sum over the clients whose vectors arrived, with the unmatched masks of `dropped` removed:
  // reveal(survivor, dropped) asks a survivor for the seed it shares with a dropped peer.
  RingVector unmasked_sum(const std::vector<int64_t>& dropped,
                          const std::function<uint64_t(int64_t survivor, int64_t dropped)>& reveal);
  int64_t seeds_revealed() const { return seeds_revealed_; }

 private:
  int64_t length_;
  std::map<int64_t, RingVector> held_;
  int64_t seeds_revealed_ = 0;
};

}  // namespace xtrain::federated
