#include "xtrain/checkpoint/model_parallel.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "xtrain/base/error.h"

namespace xtrain::checkpoint {

namespace {
constexpr const char* kManifestFile = "model_parallel.json";

// The key's parameter name: "exp_avg/blocks.0.attn.qkv.weight" -> "blocks.0.attn.qkv.weight".
std::string param_of(const std::string& key, bool optimizer) {
  if (!optimizer) return key;
  const auto slash = key.find('/');
  return slash == std::string::npos ? key : key.substr(slash + 1);
}

// Per key, the tensor-parallel pieces of the first stage that holds it, and the keys in the order
// rank (tp 0) first met them.
struct Pieces {
  int64_t stage = -1;
  std::vector<at::Tensor> shards;
};
struct Collected {
  std::map<std::string, Pieces> pieces;
  std::vector<std::string> order;
  void add(NamedTensors& tensors, int64_t stage, int64_t tp_rank) {
    for (auto& [key, tensor] : tensors) {
      auto& p = pieces[key];
      if (p.stage < 0) {
        p.stage = stage;
        if (tp_rank == 0) order.push_back(key);
      }
      if (p.stage == stage) p.shards.push_back(std::move(tensor));
    }
  }
};

NamedTensors join(const CheckpointReader& reader, const ModelParallelManifest& m, Collected& c, bool optimizer,
                  const MergeSteps& steps) {
  NamedTensors out;
  for (const auto& key : c.order) {
    auto& p = c.pieces.at(key);
    XTRAIN_USAGE_CHECK(static_cast<int64_t>(p.shards.size()) == m.tensor_parallel, "checkpoint ", reader.dir(), ": ",
                       key, " has ", p.shards.size(), " tensor-parallel shards, expected ", m.tensor_parallel);
    auto it = m.shards.find(param_of(key, optimizer));
    out.emplace_back(key, steps.unshard(p.shards, it == m.shards.end() ? TensorSplit{} : it->second, key));
  }
  return out;
}
}  // namespace

std::string model_parallel_scope(int64_t tp_rank, int64_t pp_rank) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "mp_rank_%02lld_%03lld_", static_cast<long long>(tp_rank),
                static_cast<long long>(pp_rank));
  return buf;
}

void write_model_parallel_manifest(CheckpointWriter& writer, const ModelParallelManifest& m) {
  nlohmann::json shards = nlohmann::json::object();
  for (const auto& [name, s] : m.shards) shards[name] = {{"dim", s.dim}, {"stride", s.stride}};
  const nlohmann::json j = {{"tensor_parallel", m.tensor_parallel},
                            {"pipeline", m.pipeline},
                            {"data_parallel", m.data_parallel},
                            {"order", m.order},
                            {"shards", shards}};
  writer.write_text(kManifestFile, j.dump(1));
}

std::optional<ModelParallelManifest> read_model_parallel_manifest(const CheckpointReader& reader) {
  if (!reader.has_file(kManifestFile)) return std::nullopt;
  const auto j = nlohmann::json::parse(reader.read_text(kManifestFile));
  ModelParallelManifest m;
  m.tensor_parallel = j.at("tensor_parallel").get<int64_t>();
  m.pipeline = j.at("pipeline").get<int64_t>();
  if (j.contains("data_parallel")) m.data_parallel = j.at("data_parallel").get<int64_t>();
  if (j.contains("order")) m.order = j.at("order").get<std::string>();
  for (const auto& [name, s] : j.at("shards").items()) {
    m.shards[name] = {s.at("dim").get<int64_t>(), s.at("stride").get<int64_t>()};
  }
  return m;
}

void check_model_parallel_manifest(const CheckpointReader& reader, int64_t tp, int64_t pp) {
  const auto m = read_model_parallel_manifest(reader);
  if (!m) {
    XTRAIN_USAGE_CHECK(tp == 1 && pp == 1, "checkpoint ", reader.dir(), " holds the whole model (written without ",
                       "tensor or pipeline parallelism); resume it with tensor_parallel.size = 1 and pipeline.stages = 1");
    return;
  }
  XTRAIN_USAGE_CHECK(m->tensor_parallel == tp && m->pipeline == pp, "checkpoint ", reader.dir(),
                     " was written with tensor_parallel.size ", m->tensor_parallel, " and pipeline.stages ", m->pipeline,
                     ", this run has ", tp, " and ", pp,
                     "; resume with the same sizes, or merge it first (xtrain ckpt consolidate) and resume that with 1 and 1");
}

CheckpointReader model_parallel_rank0(const CheckpointReader& reader) {
  return reader.has_file(kManifestFile) ? reader.scoped(model_parallel_scope(0, 0)) : reader;
}

bool is_run_file(const std::string& file) { return file.rfind("mp_rank_", 0) != 0 && file != kManifestFile; }

MergedTensors merge_model_parallel(const CheckpointReader& reader, const ModelParallelManifest& m, bool with_optimizer,
                                   const MergeSteps& steps) {
  Collected model, optimizer;
  for (int64_t s = 0; s < m.pipeline; ++s) {
    for (int64_t t = 0; t < m.tensor_parallel; ++t) {
      auto c = steps.consolidate(reader.scoped(model_parallel_scope(t, s)), with_optimizer);
      model.add(c.model, s, t);
      optimizer.add(c.optimizer, s, t);
    }
  }
  MergedTensors out;
  out.model = join(reader, m, model, false, steps);
  out.optimizer = join(reader, m, optimizer, true, steps);
  return out;
}

}  // namespace xtrain::checkpoint
