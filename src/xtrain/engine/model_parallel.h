// The 3D grid of a run (topology::ProcessGrid from tensor_parallel.size and pipeline.stages) turned
// into process groups, and the checkpoints of model-parallel runs: every tensor/pipeline rank
// writes its engine files under the scope "mp_rank_<tp>_<pp>_", rank 0 adds model_parallel.json
// (the grid and how each parameter is split across the tensor-parallel ranks), and consolidation
// merges the shards into the one-rank model's tensors (Megatron's checkpoint merge).
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/config/config.h"
#include "xtrain/parallel/tensor/shard_spec.h"
#include "xtrain/topology/process_grid.h"

namespace torch::nn {
class Module;
}
namespace xtrain::comm {
class Communicator;
struct RankInfo;
}
namespace xtrain::checkpoint {
class CheckpointWriter;
class CheckpointReader;
}

namespace xtrain {

struct ParallelGroups {
  topology::ProcessGrid grid{1};
  int64_t rank = 0;  // in the world
  std::shared_ptr<comm::Communicator> world, dp, tp, pp, mp;  // mp: tensor × pipeline (one replica)
  std::shared_ptr<comm::Communicator> embedding;  // first and last pipeline stage; null on the others
  topology::Coord coord() const { return grid.coord(rank); }
  bool model_parallel() const { return grid.size(topology::Axis::kTensor) * grid.size(topology::Axis::kPipeline) > 1; }
  // "" without model parallelism, else "mp_rank_<tp>_<pp>_" (two and three digits, as Megatron's folders).
  std::string checkpoint_scope() const;
};

// checkpoint.use_node_local_storage: on one node every rank shares the file system, so the key
// changes nothing; across nodes it is refused (not supported yet). Node count from RankInfo's
// local world size.
void check_checkpoint_storage(const config::Config& config, const comm::RankInfo& rank);

// Collective over `world`: every rank creates every group, in the same order.
ParallelGroups make_parallel_groups(std::shared_ptr<comm::Communicator> world, const config::Config& config);

// The norm weight of each parameter of a tensor-parallel module held whole on every rank: 1/tp.
std::map<std::string, double> replicated_norm_weights(const torch::nn::Module& module, int64_t tp);

// model_parallel.json: the grid and each tensor-parallel parameter's split.
void write_model_parallel_manifest(checkpoint::CheckpointWriter& writer, const topology::ProcessGrid& grid,
                                   const std::map<std::string, parallel::tensor::ShardSpec>& specs);
// UsageError unless a checkpoint written by a model-parallel run has this grid's tensor and pipeline
// sizes (the data-parallel size may change), or a one-rank-model checkpoint is read with none.
void check_model_parallel_manifest(const checkpoint::CheckpointReader& reader, const topology::ProcessGrid& grid);

// Full fp32 tensors of any checkpoint xtrain writes: ZeRO shards consolidated, then tensor-parallel
// shards merged and pipeline stages joined. model: by parameter name; optimizer: "<state>/<name>".
struct MergedCheckpoint {
  std::vector<std::pair<std::string, at::Tensor>> model, optimizer;
};
MergedCheckpoint merge_checkpoint(const checkpoint::CheckpointReader& reader, bool with_optimizer);
// The files of the one-rank model: buffers.pt and engine.json of model-parallel rank 0 (or of the
// checkpoint itself without model parallelism).
checkpoint::CheckpointReader model_parallel_rank0(const checkpoint::CheckpointReader& reader);

// `xtrain ckpt consolidate`: writes reader's checkpoint under out_root (same tag) as a one-rank,
// stage-0 checkpoint: model.pt, optimizer.pt, and the other files of model-parallel rank 0 and of
// the run (config.json, trainer state). Returns the folder written.
std::string write_merged_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& out_root);

}  // namespace xtrain
