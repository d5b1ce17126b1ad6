// The process groups of a 3D-parallel run: the DP × PP × TP grid (topology::ProcessGrid, from the
// tensor and pipeline sizes and an order string) turned into communicators, as Megatron-core's
// parallel_state does from its RankGenerator. The choice: built from the sizes and the order, not
// from a config, and passed explicitly (no module globals).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "xtrain/topology/process_grid.h"

namespace xtrain::comm {
class Communicator;
}

namespace xtrain::parallel {

struct ParallelGroups {
  topology::ProcessGrid grid{1};
  int64_t rank = 0;  // in the world
  std::shared_ptr<comm::Communicator> world, dp, tp, pp, mp;  // mp: tensor × pipeline (one replica)
  std::shared_ptr<comm::Communicator> embedding;  // first and last pipeline stage; null on the others
  topology::Coord coord() const { return grid.coord(rank); }
  bool model_parallel() const { return grid.size(topology::Axis::kTensor) * grid.size(topology::Axis::kPipeline) > 1; }
};

// Collective over `world`: every rank creates every group, in the same order. `order` as
// topology::ProcessGrid takes it ("tp-dp-pp": tensor-parallel peers on neighbouring ranks).
// Without model parallelism dp is `world` and the others are single-process groups.
ParallelGroups make_parallel_groups(std::shared_ptr<comm::Communicator> world, int64_t tp, int64_t pp,
                                    const std::string& order = "tp-dp-pp");

}  // namespace xtrain::parallel
