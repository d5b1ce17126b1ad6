// Sharded checkpoints: rank 0 writes zero.json (stage, world size, every parameter's name and
// shape); every rank writes zero_rank_<r>.pt holding its fragments as 1-D tensors named
// "master/<param>@<first element>" and "<state>/<param>@<first element>". Fragments are keyed by
// parameter name and element range, never by rank layout, so consolidation and resharding to any
// world size are the same function: rebuild each full tensor, then cut it again.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/zero/shard_layout.h"

namespace xtrain::checkpoint {
class CheckpointWriter;
class CheckpointReader;
}

namespace xtrain::zero {

using NamedBuffers = std::vector<std::pair<std::string, at::Tensor>>;

// `buffers`: "master" and each optimizer state, as this rank's shard buffers.
void save_shards(checkpoint::CheckpointWriter& writer, const ShardLayout& layout, int64_t rank, int64_t stage,
                 const NamedBuffers& buffers);

// Full fp32 tensors of any checkpoint the strategies write (sharded at any world size, or stage 0's
// model.pt / optimizer.pt): model by parameter name, optimizer by "<state>/<param>" (stage 0's form).
struct Consolidated {
  std::vector<std::pair<std::string, at::Tensor>> model, optimizer;
};
Consolidated consolidate(const checkpoint::CheckpointReader& reader, bool with_optimizer);

// Writes `reader`'s checkpoint under out_root with the same tag as a stage-0 checkpoint: model.pt and
// optimizer.pt whole, every other file copied, the shards left out (DeepSpeed's zero_to_fp32, but
// loadable for training too). Returns the written folder.
std::string write_consolidated(const checkpoint::CheckpointReader& reader, const std::string& out_root);

// Copies one file (tensors when it ends in .pt, else text) into `writer` under the same name.
void copy_checkpoint_file(const checkpoint::CheckpointReader& reader, checkpoint::CheckpointWriter& writer,
                          const std::string& file);

// Fills `rank`'s shard of each buffer ("master" from the model, a state from the optimizer).
void load_shards(const Consolidated& full, const ShardLayout& layout, int64_t rank, const NamedBuffers& buffers);

// zero_optimization.load_from_fp32_weights false: the fp32 master is rebuilt from the model's
// weights (the master rounded to `param_dtype`, what the model holds) instead of the saved fp32
// copy, as DeepSpeed then refreshes it from the 16-bit parameters. A no-op in fp32 training.
void round_master(const NamedBuffers& buffers, at::ScalarType param_dtype);

}  // namespace xtrain::zero
