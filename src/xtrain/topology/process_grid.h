// The DP × PP × TP process grid: which ranks form each data-, pipeline- and tensor-parallel group,
// derived from the sizes and an order string, as Megatron-core's RankGenerator does
// (parallel_state.py): in "tp-dp-pp" tp varies fastest, so tensor-parallel peers are neighbours.
// Pure arithmetic, no process groups: comm/ turns a group's rank list into a Communicator.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::topology {

enum class Axis { kData = 0, kPipeline = 1, kTensor = 2 };

const char* axis_name(Axis axis);  // "dp", "pp", "tp"

struct Coord {
  int64_t dp = 0, pp = 0, tp = 0;
  int64_t operator[](Axis a) const { return a == Axis::kData ? dp : a == Axis::kPipeline ? pp : tp; }
  bool operator==(const Coord& o) const { return dp == o.dp && pp == o.pp && tp == o.tp; }
};

class ProcessGrid {
 public:
  // world_size = dp × pp × tp (dp is derived). `order`: "tp", "dp", "pp" joined by '-', each once,
  // the first varying fastest. UsageError naming tensor_parallel.size / pipeline.stages when the
  // sizes do not divide the world.
  ProcessGrid(int64_t world_size, int64_t tp = 1, int64_t pp = 1, const std::string& order = "tp-dp-pp");
  // Every rank in one data-parallel group (the only grid before 3D parallelism).
  static ProcessGrid data_parallel(int64_t world_size) { return ProcessGrid(world_size); }

  int64_t world_size() const { return world_; }
  int64_t size(Axis axis) const { return sizes_[static_cast<int>(axis)]; }
  const std::string& order() const { return order_; }

  Coord coord(int64_t rank) const;
  int64_t rank(const Coord& coord) const;
  // This rank's index inside its group along `axis` (its dp/pp/tp rank).
  int64_t axis_rank(Axis axis, int64_t rank) const { return coord(rank)[axis]; }

  // The ranks that differ from `rank` only along `axes` (ascending): {kData} is rank's data-parallel
  // group, {kTensor, kPipeline} its model-parallel group.
  std::vector<int64_t> group(const std::vector<Axis>& axes, int64_t rank) const;
  std::vector<int64_t> group(Axis axis, int64_t rank) const { return group(std::vector<Axis>{axis}, rank); }
  // Every such group, ordered by its smallest rank: the list all ranks iterate when creating
  // process groups (every rank must create every group, in the same order).
  std::vector<std::vector<int64_t>> groups(const std::vector<Axis>& axes) const;
  std::vector<std::vector<int64_t>> groups(Axis axis) const { return groups(std::vector<Axis>{axis}); }

  // Pipeline neighbours: the rank holding stage pp + offset of `rank`'s pipeline group, modulo the
  // number of stages (Megatron's next/prev rank wrap around: the last stage's next is the first).
  int64_t pipeline_peer(int64_t rank, int64_t offset) const;
  int64_t next_stage_rank(int64_t rank) const { return pipeline_peer(rank, 1); }
  int64_t prev_stage_rank(int64_t rank) const { return pipeline_peer(rank, -1); }
  bool is_first_stage(int64_t rank) const { return coord(rank).pp == 0; }
  bool is_last_stage(int64_t rank) const { return coord(rank).pp == size(Axis::kPipeline) - 1; }
  // The ranks that hold the tied embedding: first and last stage of each pipeline group (one rank
  // when pp = 1), ordered as groups(kPipeline) — Megatron's embedding groups, whose gradients are
  // all-reduced to keep wte equal on both ends.
  std::vector<std::vector<int64_t>> embedding_groups() const;

  std::string describe() const;  // "world 8 = dp 2 x pp 2 x tp 2 (order tp-dp-pp)"

 private:
  int64_t world_;
  std::array<int64_t, 3> sizes_;   // by Axis
  std::array<int64_t, 3> strides_; // by Axis: rank = sum coord[a] * strides_[a]
  std::string order_;
};

}  // namespace xtrain::topology
