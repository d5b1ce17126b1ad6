// Shard arithmetic for ZeRO stages 1-3: parameters are grouped into units (consecutive slots: a
// reduce bucket for stage 2, a submodule for stage 3, the whole model for stage 1); each unit is
// padded to a multiple of world_size × alignment and split into world_size equal shards, rank r
// owning shard r of every unit. A rank's state (fp32 master, optimizer moments, reduced gradients)
// is the concatenation of its shards, so one reduce-scatter / all-gather per unit moves exactly
// the bytes ZeRO prescribes. Pure functions; see shared/design/zero.md.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/zero/flat_layout.h"

namespace xtrain::zero {

struct Unit {
  int64_t begin = 0;   // into the full flat buffer
  int64_t numel = 0;   // padded: a multiple of world_size × alignment
  int64_t shard = 0;   // numel / world_size
  int64_t local = 0;   // where this unit's shard starts in a rank's shard buffer
  int first_slot = 0, end_slot = 0;  // slots [first_slot, end_slot)
};

// A piece of one parameter held by one rank: elements [start, start + numel) of the flattened
// parameter, at `local` in the rank's shard buffer.
struct Fragment {
  int slot = 0;
  int64_t start = 0, numel = 0, local = 0;
};

struct ShardLayout {
  FlatLayout flat;  // slots at their offsets in the full (per-unit padded) buffer; world_size = W
  std::vector<Unit> units;
  std::vector<int> unit_of_slot;

  int64_t world_size() const { return flat.world_size; }
  int64_t shard_numel() const { return flat.numel / flat.world_size; }  // per rank, padding included
  int64_t owned_begin(size_t unit, int64_t rank) const { return units[unit].begin + rank * units[unit].shard; }
  // Optimizer segments of `rank`'s shard buffer (offsets into it; param_id = slot index).
  std::vector<optim::Segment> local_segments(int64_t rank) const;
  std::vector<Fragment> fragments(int64_t rank) const;
};

// `unit_of[i]`: the unit of parameter i, non-decreasing from 0 without gaps; `group[i]`: its
// parameter group (empty: all in group 0).
ShardLayout make_shard_layout(const NamedParams& params, const std::vector<int>& group,
                              const std::vector<int>& unit_of, int64_t world_size, int64_t alignment);
// Consecutive parameters grouped until a unit holds >= bucket_size elements.
std::vector<int> units_by_size(const NamedParams& params, int64_t bucket_size);

// The post-step parameter gather of a unit whose shards have `shard` elements, cut by
// zero_optimization.allgather_bucket_size as DeepSpeed's all_gather_dp_groups cuts it:
// max(1, shard·W / bucket) pieces of every shard, each a multiple of 2 elements, the last taking
// the rest. Returns each piece's {offset, length} within the shard.
std::vector<std::pair<int64_t, int64_t>> allgather_pieces(int64_t shard, int64_t world_size, int64_t bucket_size);

}  // namespace xtrain::zero
