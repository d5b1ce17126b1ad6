// Checkpoints of model-parallel runs: every tensor/pipeline rank writes its files under the scope
// "mp_rank_<tp>_<pp>_", rank 0 adds model_parallel.json (the grid's sizes and order, and how each
// parameter is split across the tensor-parallel ranks), and merging joins the ranks' tensors into
// the one-rank model's (Megatron's checkpoint merge). The choice: this area knows the layout on
// disk only; how one scope's ZeRO shards become whole tensors and how tensor-parallel pieces join
// are passed in (zero/ and parallel/tensor/ sit above it).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "xtrain/checkpoint/store.h"

namespace xtrain::checkpoint {

// How one parameter is split over the tensor-parallel ranks (parallel::tensor::ShardSpec's fields).
struct TensorSplit {
  int64_t dim = -1;    // -1: the same full tensor on every rank
  int64_t stride = 1;  // that dimension is `stride` equal blocks, each split on its own
};

// model_parallel.json.
struct ModelParallelManifest {
  int64_t tensor_parallel = 1, pipeline = 1, data_parallel = 1;
  std::string order = "tp-dp-pp";
  std::map<std::string, TensorSplit> shards;  // only the split parameters
};

// "mp_rank_<tp>_<pp>_" (two and three digits, as Megatron's folders).
std::string model_parallel_scope(int64_t tp_rank, int64_t pp_rank);

void write_model_parallel_manifest(CheckpointWriter& writer, const ModelParallelManifest& manifest);
// The manifest, or nothing for a checkpoint of the one-rank model.
std::optional<ModelParallelManifest> read_model_parallel_manifest(const CheckpointReader& reader);
// UsageError unless a checkpoint written by a model-parallel run has these tensor and pipeline
// sizes (the data-parallel size may change), or a one-rank-model checkpoint is read with 1 and 1.
void check_model_parallel_manifest(const CheckpointReader& reader, int64_t tp, int64_t pp);

// The files of the one-rank model: those of model-parallel rank 0 (or the checkpoint itself).
CheckpointReader model_parallel_rank0(const CheckpointReader& reader);
// A file of the run itself, not of one model-parallel rank (config.json, trainer state).
bool is_run_file(const std::string& file);

struct MergedTensors {
  NamedTensors model, optimizer;  // model: by parameter name; optimizer: "<state>/<name>"
};
struct MergeSteps {
  // Whole (ZeRO-consolidated) tensors of one scope's files.
  std::function<MergedTensors(const CheckpointReader& scope, bool with_optimizer)> consolidate;
  // The full tensor from the tensor-parallel ranks' pieces, in rank order.
  std::function<at::Tensor(const std::vector<at::Tensor>& pieces, const TensorSplit& split, const std::string& key)>
      unshard;
};
// Every rank's tensors joined: per key, the pieces of the first pipeline stage that holds it (a
// tied embedding is on two), unsharded in tensor-parallel rank order; keys in rank-0 order.
MergedTensors merge_model_parallel(const CheckpointReader& reader, const ModelParallelManifest& manifest,
                                   bool with_optimizer, const MergeSteps& steps);

}  // namespace xtrain::checkpoint
