// How each parameter of a tensor-parallel module is split across the group, by name, so a
// checkpoint can be consolidated into (or resharded from) the single-rank model's tensors: a
// ShardSpec per parameter (the split dimension and stride, or replicated), found by walking the
// module for ColumnParallelLinear, RowParallelLinear and VocabParallelEmbedding. Pure tensor
// arithmetic; no communication.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xtrain::parallel::tensor {

struct ShardSpec {
  int64_t dim = -1;     // the split dimension; -1: the same full tensor on every rank
  int64_t stride = 1;   // that dimension is `stride` equal blocks, each split on its own (fused qkv: 3)
  bool operator==(const ShardSpec& o) const { return dim == o.dim && stride == o.stride; }
};

// Every parameter of `module` (named as module.named_parameters()) with its spec; parameters
// outside the tensor-parallel layers (LayerNorms, ...) are replicated.
std::map<std::string, ShardSpec> shard_specs(const torch::nn::Module& module);

// Rank r's shard of `full` out of n (a copy); UsageError when n · stride does not divide the dim.
at::Tensor shard_of(const at::Tensor& full, const ShardSpec& spec, int64_t r, int64_t n);
// The full tensor from every rank's shard, in rank order (replicated: the first; the others must
// be equal, else UsageError naming `name`).
at::Tensor unshard(const std::vector<at::Tensor>& shards, const ShardSpec& spec, const std::string& name = "");

}  // namespace xtrain::parallel::tensor
