#include "xtrain/engine/model_parallel.h"

#include <nlohmann/json.hpp>

#include <ATen/Functions.h>
#include <torch/nn/module.h>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/zero/shard_io.h"

namespace xtrain {

namespace {
using topology::Axis;
constexpr const char* kManifestFile = "model_parallel.json";

std::string scope_of(int64_t tp_rank, int64_t pp_rank) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "mp_rank_%02lld_%03lld_", static_cast<long long>(tp_rank),
                static_cast<long long>(pp_rank));
  return buf;
}

// This rank's member of each group along `axes` (every rank creates all of them, in order).
std::shared_ptr<comm::Communicator> own_group(comm::Communicator& world, const topology::ProcessGrid& grid,
                                              const std::vector<Axis>& axes) {
  std::shared_ptr<comm::Communicator> mine;
  for (const auto& ranks : grid.groups(axes)) {
    auto g = world.new_group(std::vector<int>(ranks.begin(), ranks.end()));
    if (g) mine = std::move(g);
  }
  return mine;
}

// The key's parameter name: "exp_avg/blocks.0.attn.qkv.weight" -> "blocks.0.attn.qkv.weight".
std::string param_of(const std::string& key, bool optimizer) {
  if (!optimizer) return key;
  const auto slash = key.find('/');
  return slash == std::string::npos ? key : key.substr(slash + 1);
}
}  // namespace

void check_checkpoint_storage(const config::Config& config, const comm::RankInfo& rank) {
  XTRAIN_USAGE_CHECK(!config.checkpoint.use_node_local_storage || rank.local_world_size >= rank.world_size,
                     "not supported yet: checkpoint.use_node_local_storage on more than one node (this run has ",
                     rank.world_size, " ranks, ", rank.local_world_size, " on this node); every rank needs one "
                     "shared checkpoint folder: remove the key");
}

std::string ParallelGroups::checkpoint_scope() const {
  if (!model_parallel()) return "";
  const auto c = coord();
  return scope_of(c.tp, c.pp);
}

ParallelGroups make_parallel_groups(std::shared_ptr<comm::Communicator> world, const config::Config& config) {
  ParallelGroups g;
  g.rank = world->rank();
  g.grid = topology::ProcessGrid(world->size(), config.tensor_parallel.size, config.pipeline.stages);
  g.world = world;
  if (!g.model_parallel()) {
    g.dp = world;
    g.tp = g.pp = g.mp = comm::Communicator::single();
    return g;
  }
  g.dp = own_group(*world, g.grid, {Axis::kData});
  g.tp = own_group(*world, g.grid, {Axis::kTensor});
  g.pp = own_group(*world, g.grid, {Axis::kPipeline});
  g.mp = own_group(*world, g.grid, {Axis::kTensor, Axis::kPipeline});
  if (g.grid.size(Axis::kPipeline) > 1) {
    for (const auto& ranks : g.grid.embedding_groups()) {
      auto e = world->new_group(std::vector<int>(ranks.begin(), ranks.end()));
      if (e) g.embedding = std::move(e);
    }
  }
  return g;
}

std::map<std::string, double> replicated_norm_weights(const torch::nn::Module& module, int64_t tp) {
  std::map<std::string, double> out;
  if (tp <= 1) return out;
  for (const auto& [name, spec] : parallel::tensor::shard_specs(module)) {
    if (spec.dim < 0) out[name] = 1.0 / static_cast<double>(tp);
  }
  return out;
}

void write_model_parallel_manifest(checkpoint::CheckpointWriter& writer, const topology::ProcessGrid& grid,
                                   const std::map<std::string, parallel::tensor::ShardSpec>& specs) {
  nlohmann::json shards = nlohmann::json::object();
  for (const auto& [name, spec] : specs) {
    if (spec.dim >= 0) shards[name] = {{"dim", spec.dim}, {"stride", spec.stride}};
  }
  const nlohmann::json j = {{"tensor_parallel", grid.size(Axis::kTensor)},
                            {"pipeline", grid.size(Axis::kPipeline)},
                            {"data_parallel", grid.size(Axis::kData)},
                            {"order", grid.order()},
                            {"shards", shards}};
  writer.write_text(kManifestFile, j.dump(1));
}

void check_model_parallel_manifest(const checkpoint::CheckpointReader& reader, const topology::ProcessGrid& grid) {
  const int64_t tp = grid.size(Axis::kTensor), pp = grid.size(Axis::kPipeline);
  if (!reader.has_file(kManifestFile)) {
    XTRAIN_USAGE_CHECK(tp == 1 && pp == 1, "checkpoint ", reader.dir(), " holds the whole model (written without ",
                       "tensor or pipeline parallelism); resume it with tensor_parallel.size = 1 and pipeline.stages = 1");
    return;
  }
  const auto j = nlohmann::json::parse(reader.read_text(kManifestFile));
  const int64_t saved_tp = j.at("tensor_parallel").get<int64_t>(), saved_pp = j.at("pipeline").get<int64_t>();
  XTRAIN_USAGE_CHECK(saved_tp == tp && saved_pp == pp, "checkpoint ", reader.dir(), " was written with tensor_parallel.size ",
                     saved_tp, " and pipeline.stages ", saved_pp, ", this run has ", tp, " and ", pp,
                     "; resume with the same sizes, or merge it first (xtrain ckpt consolidate) and resume that with 1 and 1");
}

MergedCheckpoint merge_checkpoint(const checkpoint::CheckpointReader& reader, bool with_optimizer) {
  MergedCheckpoint out;
  if (!reader.has_file(kManifestFile)) {
    auto c = zero::consolidate(reader, with_optimizer);
    out.model = std::move(c.model);
    out.optimizer = std::move(c.optimizer);
    return out;
  }
  const auto j = nlohmann::json::parse(reader.read_text(kManifestFile));
  const int64_t tp = j.at("tensor_parallel").get<int64_t>(), pp = j.at("pipeline").get<int64_t>();
  std::map<std::string, parallel::tensor::ShardSpec> specs;
  for (const auto& [name, s] : j.at("shards").items()) specs[name] = {s.at("dim").get<int64_t>(), s.at("stride").get<int64_t>()};
  // Per key, the tensor-parallel shards of the first stage that holds it (a tied embedding is on two).
  struct Pieces {
    int64_t stage = -1;
    std::vector<at::Tensor> shards;
  };
  std::map<std::string, Pieces> model, optimizer;
  std::vector<std::string> model_order, optimizer_order;
  auto collect = [&](std::vector<std::pair<std::string, at::Tensor>>& tensors, int64_t stage, int64_t t,
                     std::map<std::string, Pieces>& into, std::vector<std::string>& order) {
    for (auto& [key, tensor] : tensors) {
      auto& p = into[key];
      if (p.stage < 0) {
        p.stage = stage;
        if (t == 0) order.push_back(key);
      }
      if (p.stage == stage) p.shards.push_back(std::move(tensor));
    }
  };
  for (int64_t s = 0; s < pp; ++s) {
    for (int64_t t = 0; t < tp; ++t) {
      auto c = zero::consolidate(reader.scoped(scope_of(t, s)), with_optimizer);
      collect(c.model, s, t, model, model_order);
      collect(c.optimizer, s, t, optimizer, optimizer_order);
    }
  }
  auto merge = [&](const std::vector<std::string>& order, std::map<std::string, Pieces>& pieces, bool is_optimizer,
                   std::vector<std::pair<std::string, at::Tensor>>& dst) {
    for (const auto& key : order) {
      auto& p = pieces.at(key);
      XTRAIN_USAGE_CHECK(static_cast<int64_t>(p.shards.size()) == tp, "checkpoint ", reader.dir(), ": ", key, " has ",
                         p.shards.size(), " tensor-parallel shards, expected ", tp);
      auto it = specs.find(param_of(key, is_optimizer));
      const parallel::tensor::ShardSpec spec = it == specs.end() ? parallel::tensor::ShardSpec{} : it->second;
      dst.emplace_back(key, parallel::tensor::unshard(p.shards, spec, key));
    }
  };
  merge(model_order, model, false, out.model);
  merge(optimizer_order, optimizer, true, out.optimizer);
  return out;
}

checkpoint::CheckpointReader model_parallel_rank0(const checkpoint::CheckpointReader& reader) {
  return reader.has_file(kManifestFile) ? reader.scoped(scope_of(0, 0)) : reader;
}

std::string write_merged_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& out_root) {
  if (!reader.has_file(kManifestFile)) return zero::write_consolidated(reader, out_root);
  const auto merged = merge_checkpoint(reader, /*with_optimizer=*/true);
  checkpoint::CheckpointWriter writer(out_root, reader.tag(), 0);
  writer.write_tensors("model.pt", merged.model);
  if (!merged.optimizer.empty()) writer.write_tensors("optimizer.pt", merged.optimizer);
  const auto rank0 = model_parallel_rank0(reader);
  for (const std::string file : {"buffers.pt", "engine.json"}) {
    if (rank0.has_file(file)) zero::copy_checkpoint_file(rank0, writer, file);
  }
  for (const auto& file : reader.files()) {  // the run's own files: config.json, trainer state
    if (file.rfind("mp_rank_", 0) != 0 && file != kManifestFile) zero::copy_checkpoint_file(reader, writer, file);
  }
  writer.finish_rank();
  writer.commit();
  return out_root + "/" + reader.tag();
}

}  // namespace xtrain
