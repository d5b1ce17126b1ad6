// Full fp32 tensors of any checkpoint xtrain writes, and `xtrain ckpt consolidate`: ZeRO shards
// consolidated (zero/shard_io.h), then tensor-parallel shards merged and pipeline stages joined
// (checkpoint/model_parallel.h, with parallel::tensor::unshard). The wiring of those two areas.
#pragma once
#include <string>

#include "xtrain/checkpoint/model_parallel.h"

namespace xtrain {

// model: by parameter name; optimizer: "<state>/<name>".
using MergedCheckpoint = checkpoint::MergedTensors;
MergedCheckpoint merge_checkpoint(const checkpoint::CheckpointReader& reader, bool with_optimizer);

// `xtrain ckpt consolidate`: writes reader's checkpoint under out_root (same tag) as a one-rank,
// stage-0 checkpoint: model.pt, optimizer.pt, and the other files of model-parallel rank 0 and of
// the run (config.json, trainer state). Returns the folder written.
std::string write_merged_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& out_root);

}  // namespace xtrain
