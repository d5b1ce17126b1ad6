#include "xtrain/run/run_checkpoint.h"

#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/model_parallel.h"
#include "xtrain/checkpoint/node_parts.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/run/node_local_checkpoint.h"
#include "xtrain/run/run_dir.h"

namespace xtrain {
namespace fs = std::filesystem;

namespace {

std::string trainer_state_file(int rank) { return rank == 0 ? "trainer.json" : c10::str("trainer_rank", rank, ".json"); }

// The engine's files of this tensor/pipeline rank: "" without model parallelism.
std::string checkpoint_scope(const parallel::ParallelGroups& g) {
  if (!g.model_parallel()) return "";
  const auto c = g.coord();
  return checkpoint::model_parallel_scope(c.tp, c.pp);
}

NodeLocalRun node_local_run(const Setup& s) { return {s.config, s.rank, *s.comm}; }

checkpoint::ModelParallelManifest manifest_of(const Setup& s) {
  using topology::Axis;
  const auto& grid = s.groups.grid;
  checkpoint::ModelParallelManifest m;
  m.tensor_parallel = grid.size(Axis::kTensor);
  m.pipeline = grid.size(Axis::kPipeline);
  m.data_parallel = grid.size(Axis::kData);
  m.order = grid.order();
  for (const auto& [name, spec] : s.shard_specs) {
    if (spec.dim >= 0) m.shards[name] = {spec.dim, spec.stride};
  }
  return m;
}

// A checkpoint saved at another data-parallel size (an elastic restart on fewer or more nodes): the
// global batch stays train_batch_size, so gradient accumulation (or the micro batch) changes. Says
// what changed, from the batch triple in the checkpoint's config.json.
void log_batch_change(const Setup& s, const checkpoint::CheckpointReader& reader) {
  if (!s.lead() || !reader.has_file("config.json")) return;
  const auto saved = nlohmann::json::parse(reader.read_text("config.json"), nullptr, false);
  if (!saved.is_object()) return;
  const auto& e = s.config.engine;
  const int64_t tb = saved.value("train_batch_size", int64_t{0});
  const int64_t mb = saved.value("train_micro_batch_size_per_gpu", int64_t{0});
  const int64_t gas = saved.value("gradient_accumulation_steps", int64_t{0});
  if (tb <= 0 || mb <= 0 || gas <= 0) return;
  const int64_t dp = tb / (mb * gas);
  if (dp == s.config.dp_world_size && mb == *e.train_micro_batch_size_per_gpu && gas == *e.gradient_accumulation_steps) return;
  log::info("resume: the checkpoint was saved at data-parallel size ", dp, " (train_batch_size ", tb, " = ", mb,
            " micro x ", gas, " accumulation x ", dp, "); this run: data-parallel size ", s.config.dp_world_size,
            " (train_batch_size ", *e.train_batch_size, " = ", *e.train_micro_batch_size_per_gpu, " micro x ",
            *e.gradient_accumulation_steps, " accumulation x ", s.config.dp_world_size, ")",
            tb == *e.train_batch_size ? "" : "; the global batch changed: give train_batch_size to keep it");
}

}  // namespace

bool fault_due(const char* variable, int64_t step, int rank, const char* phase) {
  const std::string v = env::get_or(variable, "");
  if (v.empty()) return false;
  const auto colon = v.find(':');
  const int64_t at = std::stoll(v.substr(0, colon));
  const auto second = colon == std::string::npos ? std::string::npos : v.find(':', colon + 1);
  const int who = colon == std::string::npos ? 0 : std::stoi(v.substr(colon + 1, second - colon - 1));
  const std::string when = second == std::string::npos ? "" : v.substr(second + 1);
  if (step != at || rank != who || when != phase) return false;
  log::error(variable, ": rank ", rank, " kills itself at step ", step);
  return true;
}

void save(Setup& s, const std::string& run_dir) {
  const std::string root = (fs::path(run_dir) / "checkpoints").string();
  checkpoint::CheckpointWriter writer(root, "global_step" + std::to_string(s.engine->global_steps()), s.rank.rank);
  writer.set_scope(checkpoint_scope(s.groups));
  s.engine->save_checkpoint(writer);
  writer.set_scope("");
  if (s.lead() && s.groups.model_parallel()) checkpoint::write_model_parallel_manifest(writer, manifest_of(s));
  if (fault_due("XTRAIN_FAULT_IN_SAVE", s.engine->global_steps(), s.rank.rank, "mid")) std::raise(SIGKILL);
  writer.write_text(trainer_state_file(s.rank.rank), trainer_state_json(s.train_loader->state()));
  if (s.lead()) writer.write_text("config.json", config::to_json(s.config));
  writer.finish_rank();
  if (fault_due("XTRAIN_FAULT_IN_SAVE", s.engine->global_steps(), s.rank.rank)) std::raise(SIGKILL);
  commit_checkpoint(node_local_run(s), writer, root);
  s.comm->barrier();  // nobody starts the next step (or exits) before the checkpoint is committed
}

void resume(Setup& s, const std::string& run_dir) {
  std::string root = (fs::path(run_dir) / "checkpoints").string();
  const NodeLocalRun local = node_local_run(s);
  const bool node_local = node_local_storage(local);
  if (node_local) {
    root = gather_node_local(local, root);
  } else {
    XTRAIN_USAGE_CHECK(!checkpoint::latest_tag(root).empty(), "--resume: ", run_dir,
                       " has no checkpoint (checkpoints/latest is missing)");
  }
  checkpoint::CheckpointReader reader(root);
  const auto part = checkpoint::node_part_info(reader);
  XTRAIN_USAGE_CHECK(!part || part->nodes == 1, "resume: ", reader.dir(), " is node ", part ? part->node : 0,
                     "'s part of a checkpoint saved by ", part ? part->nodes : 0, " nodes with ",
                     "checkpoint.use_node_local_storage, and this run has one node: gather every node's part first ",
                     "(xtrain ckpt consolidate RUN0 OUT --node RUN1 ...)");
  using topology::Axis;
  checkpoint::check_model_parallel_manifest(reader, s.groups.grid.size(Axis::kTensor), s.groups.grid.size(Axis::kPipeline));
  log_batch_change(s, reader);
  s.engine->load_checkpoint(reader.scoped(checkpoint_scope(s.groups)));
  const std::string mine = trainer_state_file(s.rank.rank);
  if (reader.has_file(mine)) {
    s.train_loader->set_state(restore_trainer_state(reader.read_text(mine)));
  } else {  // saved by fewer ranks: this rank starts its shard of the saved epoch afresh
    auto state = restore_trainer_state(reader.read_text("trainer.json"));
    log::warn("resume: ", mine, " is not in the checkpoint (saved by a different number of ranks); rank ",
              s.rank.rank, " restarts its data shard of epoch ", state.epoch);
    state.position = 0;
    s.train_loader->set_state(state);
  }
  if (node_local) remove_gathered(local, root);
  log::info("resumed from ", node_local ? run_dir + "/checkpoints/" + reader.tag() + " (every node's part)" : reader.dir(),
            " at step ", s.engine->global_steps());
}

}  // namespace xtrain
