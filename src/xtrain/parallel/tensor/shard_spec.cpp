// ShardSpec arithmetic: a split dimension of size D with stride s is s blocks of D/s; rank r holds
// rows [r·D/(s·n), (r+1)·D/(s·n)) of each block, concatenated in block order (as load_full does).
#include "xtrain/parallel/tensor/shard_spec.h"

#include <ATen/ops/cat.h>

#include "xtrain/base/error.h"
#include "xtrain/parallel/tensor/column_parallel_linear.h"
#include "xtrain/parallel/tensor/row_parallel_linear.h"
#include "xtrain/parallel/tensor/vocab_parallel_embedding.h"

namespace xtrain::parallel::tensor {

namespace {

void add(std::map<std::string, ShardSpec>& out, const std::string& prefix, const char* name, ShardSpec spec) {
  out[prefix.empty() ? name : prefix + "." + name] = spec;
}

}  // namespace

std::map<std::string, ShardSpec> shard_specs(const torch::nn::Module& module) {
  std::map<std::string, ShardSpec> out;
  for (const auto& p : module.named_parameters()) out[p.key()] = ShardSpec{};
  for (const auto& item : module.named_modules("", /*include_self=*/true)) {
    const auto* m = item.value().get();
    if (const auto* col = dynamic_cast<const ColumnParallelLinearImpl*>(m)) {
      add(out, item.key(), "weight", {0, col->stride()});
      if (col->bias.defined()) add(out, item.key(), "bias", {0, col->stride()});
    } else if (dynamic_cast<const RowParallelLinearImpl*>(m) != nullptr) {
      add(out, item.key(), "weight", {1, 1});  // the bias is whole on every rank
    } else if (dynamic_cast<const VocabParallelEmbeddingImpl*>(m) != nullptr) {
      add(out, item.key(), "weight", {0, 1});
    }
  }
  return out;
}

at::Tensor shard_of(const at::Tensor& full, const ShardSpec& spec, int64_t r, int64_t n) {
  if (spec.dim < 0) return full.clone();
  const int64_t D = full.size(spec.dim);
  XTRAIN_USAGE_CHECK(D % (spec.stride * n) == 0, "parallel: a dimension of ", D, " cannot be split ", n,
                     " ways with stride ", spec.stride, " (shape ", full.sizes(), ")");
  const int64_t block = D / spec.stride, k = block / n;
  std::vector<at::Tensor> parts;
  for (int64_t s = 0; s < spec.stride; ++s) parts.push_back(full.narrow(spec.dim, s * block + r * k, k));
  return at::cat(parts, spec.dim);
}

at::Tensor unshard(const std::vector<at::Tensor>& shards, const ShardSpec& spec, const std::string& name) {
  XTRAIN_USAGE_CHECK(!shards.empty(), "parallel: no shards for ", name);
  if (spec.dim < 0) {
    for (size_t r = 1; r < shards.size(); ++r) {
      XTRAIN_USAGE_CHECK(shards[r].equal(shards[0]), "parallel: replicated parameter ", name, " differs on rank ", r);
    }
    return shards[0].clone();
  }
  const int64_t k = shards[0].size(spec.dim) / spec.stride;
  std::vector<at::Tensor> parts;
  for (int64_t s = 0; s < spec.stride; ++s) {
    for (const auto& shard : shards) parts.push_back(shard.narrow(spec.dim, s * k, k));
  }
  return at::cat(parts, spec.dim);
}

}  // namespace xtrain::parallel::tensor
