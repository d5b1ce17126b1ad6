// ProcessGrid: mixed-radix arithmetic over (dp, pp, tp) with strides set by the order string.
#include "xtrain/topology/process_grid.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>

#include "xtrain/base/error.h"

namespace xtrain::topology {
namespace {

Axis parse_axis(const std::string& token, const std::string& order) {
  if (token == "dp") return Axis::kData;
  if (token == "pp") return Axis::kPipeline;
  if (token == "tp") return Axis::kTensor;
  XTRAIN_USAGE_ERROR("topology: unknown axis '", token, "' in order \"", order,
                     "\" (use tp, dp and pp joined by '-', e.g. tp-dp-pp)");
}

std::vector<Axis> parse_order(const std::string& order) {
  std::vector<Axis> axes;
  std::stringstream in(order);
  std::string token;
  while (std::getline(in, token, '-')) {
    const Axis a = parse_axis(token, order);
    XTRAIN_USAGE_CHECK(std::find(axes.begin(), axes.end(), a) == axes.end(), "topology: axis '", token,
                       "' appears twice in order \"", order, "\"");
    axes.push_back(a);
  }
  XTRAIN_USAGE_CHECK(axes.size() == 3, "topology: order \"", order, "\" must name tp, dp and pp once each");
  return axes;
}

}  // namespace

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::kData: return "dp";
    case Axis::kPipeline: return "pp";
    case Axis::kTensor: return "tp";
  }
  return "?";
}

ProcessGrid::ProcessGrid(int64_t world_size, int64_t tp, int64_t pp, const std::string& order)
    : world_(world_size), order_(order) {
  XTRAIN_USAGE_CHECK(world_size >= 1, "topology: world size must be >= 1, got ", world_size);
  XTRAIN_USAGE_CHECK(tp >= 1, "topology: tensor_parallel.size must be >= 1, got ", tp);
  XTRAIN_USAGE_CHECK(pp >= 1, "topology: pipeline.stages must be >= 1, got ", pp);
  XTRAIN_USAGE_CHECK(world_size % (tp * pp) == 0, "topology: world size ", world_size,
                     " is not divisible by tensor_parallel.size (", tp, ") x pipeline.stages (", pp, ")");
  sizes_ = {world_size / (tp * pp), pp, tp};
  int64_t stride = 1;
  for (Axis a : parse_order(order)) {
    strides_[static_cast<int>(a)] = stride;
    stride *= sizes_[static_cast<int>(a)];
  }
}

Coord ProcessGrid::coord(int64_t rank) const {
  TORCH_CHECK(rank >= 0 && rank < world_, "topology: rank ", rank, " is outside world size ", world_);
  auto along = [&](Axis a) { return (rank / strides_[static_cast<int>(a)]) % sizes_[static_cast<int>(a)]; };
  return Coord{along(Axis::kData), along(Axis::kPipeline), along(Axis::kTensor)};
}

int64_t ProcessGrid::rank(const Coord& c) const {
  for (Axis a : {Axis::kData, Axis::kPipeline, Axis::kTensor}) {
    TORCH_CHECK(c[a] >= 0 && c[a] < size(a), "topology: ", axis_name(a), " coordinate ", c[a], " is outside size ",
                size(a));
  }
  return c.dp * strides_[0] + c.pp * strides_[1] + c.tp * strides_[2];
}

std::vector<int64_t> ProcessGrid::group(const std::vector<Axis>& axes, int64_t rank) const {
  const Coord base = coord(rank);
  // Rank with every listed axis set to 0, then enumerate the listed axes.
  int64_t origin = rank;
  for (Axis a : axes) origin -= base[a] * strides_[static_cast<int>(a)];
  std::vector<int64_t> members{origin};
  for (Axis a : axes) {
    std::vector<int64_t> next;
    for (int64_t m : members) {
      for (int64_t i = 0; i < size(a); ++i) next.push_back(m + i * strides_[static_cast<int>(a)]);
    }
    members = std::move(next);
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  return members;
}

std::vector<std::vector<int64_t>> ProcessGrid::groups(const std::vector<Axis>& axes) const {
  std::vector<std::vector<int64_t>> out;
  std::vector<bool> seen(world_, false);
  for (int64_t r = 0; r < world_; ++r) {
    if (seen[r]) continue;
    auto g = group(axes, r);
    for (int64_t m : g) seen[m] = true;
    out.push_back(std::move(g));
  }
  return out;
}

int64_t ProcessGrid::pipeline_peer(int64_t rank, int64_t offset) const {
  Coord c = coord(rank);
  const int64_t stages = size(Axis::kPipeline);
  c.pp = ((c.pp + offset) % stages + stages) % stages;
  return this->rank(c);
}

std::vector<std::vector<int64_t>> ProcessGrid::embedding_groups() const {
  std::vector<std::vector<int64_t>> out;
  for (const auto& pipeline : groups(Axis::kPipeline)) {
    // groups() lists each group in ascending rank; order it by stage to pick the ends.
    std::vector<int64_t> ends{pipeline.front(), pipeline.front()};
    for (int64_t r : pipeline) {
      if (is_first_stage(r)) ends[0] = r;
      if (is_last_stage(r)) ends[1] = r;
    }
    if (ends[0] == ends[1]) ends.pop_back();
    out.push_back(std::move(ends));
  }
  return out;
}

std::string ProcessGrid::describe() const {
  return c10::str("world ", world_, " = dp ", size(Axis::kData), " x pp ", size(Axis::kPipeline), " x tp ",
                  size(Axis::kTensor), " (order ", order_, ")");
}

}  // namespace xtrain::topology
