#include "xtrain/zero/shard_layout.h"

#include <algorithm>

#include "xtrain/base/error.h"

namespace xtrain::zero {

ShardLayout make_shard_layout(const NamedParams& params, const std::vector<int>& group,
                              const std::vector<int>& unit_of, int64_t world_size, int64_t alignment) {
  TORCH_INTERNAL_ASSERT(world_size > 0 && alignment > 0 && unit_of.size() == params.size());
  TORCH_INTERNAL_ASSERT(group.empty() || group.size() == params.size());
  ShardLayout out;
  auto& flat = out.flat;
  flat.world_size = world_size;
  flat.alignment = alignment;
  out.unit_of_slot = unit_of;
  const int64_t quantum = world_size * alignment;
  int64_t offset = 0, local = 0;
  auto close_unit = [&](Unit& u) {
    u.numel = std::max<int64_t>(quantum, (offset - u.begin + quantum - 1) / quantum * quantum);
    u.shard = u.numel / world_size;
    u.local = local;
    local += u.shard;
    offset = u.begin + u.numel;
    out.units.push_back(u);
  };
  Unit cur;
  for (size_t i = 0; i < params.size(); ++i) {
    if (i > 0 && unit_of[i] != unit_of[i - 1]) {
      TORCH_INTERNAL_ASSERT(unit_of[i] == unit_of[i - 1] + 1, "zero: units must be consecutive");
      cur.end_slot = static_cast<int>(i);
      close_unit(cur);
      cur = Unit{};
      cur.begin = offset;
      cur.first_slot = static_cast<int>(i);
    }
    ParamSlot s;
    s.name = params[i].first;
    s.shape = params[i].second.sizes().vec();
    s.numel = params[i].second.numel();
    s.offset = offset;
    s.group = group.empty() ? 0 : group[i];
    offset += s.numel;
    flat.used += s.numel;
    flat.slots.push_back(std::move(s));
  }
  cur.end_slot = static_cast<int>(params.size());
  close_unit(cur);
  flat.numel = offset;
  return out;
}

std::vector<int> units_by_size(const NamedParams& params, int64_t bucket_size) {
  std::vector<int> out;
  int unit = 0;
  int64_t in_unit = 0;
  for (const auto& [name, p] : params) {
    if (in_unit >= bucket_size) {
      ++unit;
      in_unit = 0;
    }
    out.push_back(unit);
    in_unit += p.numel();
  }
  return out;
}

std::vector<Fragment> ShardLayout::fragments(int64_t rank) const {
  std::vector<Fragment> out;
  for (size_t u = 0; u < units.size(); ++u) {
    const int64_t a = owned_begin(u, rank), b = a + units[u].shard;
    for (int i = units[u].first_slot; i < units[u].end_slot; ++i) {
      const auto& s = flat.slots[i];
      const int64_t lo = std::max(a, s.offset), hi = std::min(b, s.offset + s.numel);
      if (lo < hi) out.push_back({i, lo - s.offset, hi - lo, units[u].local + (lo - a)});
    }
  }
  return out;
}

std::vector<optim::Segment> ShardLayout::local_segments(int64_t rank) const {
  std::vector<optim::Segment> out;
  for (const auto& f : fragments(rank)) out.push_back({f.local, f.numel, flat.slots[f.slot].group, f.slot});
  return out;
}

std::vector<std::pair<int64_t, int64_t>> allgather_pieces(int64_t shard, int64_t world_size, int64_t bucket_size) {
  TORCH_CHECK(bucket_size > 0, "zero: allgather_bucket_size must be > 0, got ", bucket_size,
              " (zero_optimization.allgather_bucket_size)");
  int64_t pieces = std::max<int64_t>(1, shard * world_size / bucket_size);
  pieces = std::min(pieces, std::max<int64_t>(1, shard / 2));  // each piece keeps >= 2 elements
  int64_t size = shard / pieces;
  if (pieces > 1) size -= size % 2;  // DeepSpeed's start alignment (NCCL: 4 bytes of 16-bit values)
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t i = 0; i < pieces; ++i) out.emplace_back(i * size, i + 1 == pieces ? shard - i * size : size);
  return out;
}

}  // namespace xtrain::zero
