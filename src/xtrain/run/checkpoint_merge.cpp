#include "xtrain/run/checkpoint_merge.h"

#include "xtrain/parallel/tensor/shard_spec.h"
#include "xtrain/zero/shard_io.h"

namespace xtrain {

namespace {
checkpoint::MergedTensors consolidate(const checkpoint::CheckpointReader& reader, bool with_optimizer) {
  auto c = zero::consolidate(reader, with_optimizer);
  return {std::move(c.model), std::move(c.optimizer)};
}

at::Tensor unshard(const std::vector<at::Tensor>& pieces, const checkpoint::TensorSplit& split, const std::string& key) {
  return parallel::tensor::unshard(pieces, parallel::tensor::ShardSpec{split.dim, split.stride}, key);
}
}  // namespace

MergedCheckpoint merge_checkpoint(const checkpoint::CheckpointReader& reader, bool with_optimizer) {
  const auto manifest = checkpoint::read_model_parallel_manifest(reader);
  if (!manifest) return consolidate(reader, with_optimizer);
  return checkpoint::merge_model_parallel(reader, *manifest, with_optimizer, {consolidate, unshard});
}

std::string write_merged_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& out_root) {
  if (!checkpoint::read_model_parallel_manifest(reader)) return zero::write_consolidated(reader, out_root);
  const auto merged = merge_checkpoint(reader, /*with_optimizer=*/true);
  checkpoint::CheckpointWriter writer(out_root, reader.tag(), 0);
  writer.write_tensors("model.pt", merged.model);
  if (!merged.optimizer.empty()) writer.write_tensors("optimizer.pt", merged.optimizer);
  const auto rank0 = checkpoint::model_parallel_rank0(reader);
  for (const std::string file : {"buffers.pt", "engine.json"}) {
    if (rank0.has_file(file)) zero::copy_checkpoint_file(rank0, writer, file);
  }
  for (const auto& file : reader.files()) {  // the run's own files: config.json, trainer state
    if (checkpoint::is_run_file(file)) zero::copy_checkpoint_file(reader, writer, file);
  }
  writer.finish_rank();
  writer.commit();
  return out_root + "/" + reader.tag();
}

}  // namespace xtrain
