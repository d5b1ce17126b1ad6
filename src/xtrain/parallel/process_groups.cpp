#include "xtrain/parallel/process_groups.h"

#include <vector>

#include "xtrain/comm/communicator.h"

namespace xtrain::parallel {

namespace {
using topology::Axis;

// This rank's member of each group along `axes` (every rank creates all of them, in order).
std::shared_ptr<comm::Communicator> own_group(comm::Communicator& world, const std::vector<std::vector<int64_t>>& all) {
  std::shared_ptr<comm::Communicator> mine;
  for (const auto& ranks : all) {
    auto g = world.new_group(std::vector<int>(ranks.begin(), ranks.end()));
    if (g) mine = std::move(g);
  }
  return mine;
}
}  // namespace

ParallelGroups make_parallel_groups(std::shared_ptr<comm::Communicator> world, int64_t tp, int64_t pp,
                                    const std::string& order) {
  ParallelGroups g;
  g.rank = world->rank();
  g.grid = topology::ProcessGrid(world->size(), tp, pp, order);
  g.world = world;
  if (!g.model_parallel()) {
    g.dp = world;
    g.tp = g.pp = g.mp = comm::Communicator::single();
    return g;
  }
  g.dp = own_group(*world, g.grid.groups({Axis::kData}));
  g.tp = own_group(*world, g.grid.groups({Axis::kTensor}));
  g.pp = own_group(*world, g.grid.groups({Axis::kPipeline}));
  g.mp = own_group(*world, g.grid.groups({Axis::kTensor, Axis::kPipeline}));
  if (g.grid.size(Axis::kPipeline) > 1) g.embedding = own_group(*world, g.grid.embedding_groups());
  return g;
}

}  // namespace xtrain::parallel
