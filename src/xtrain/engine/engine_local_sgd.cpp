// The engine's side of xtrain.local_sgd (parallel/data/local_sgd.h): the strategy reduces over a
// group of one, so no gradient crosses ranks; LocalSgd synchronises the parameters every
// sync_every steps. Between synchronisations the ranks hold different parameters and optimizer
// states, so a checkpoint keeps each rank's own: rank 0's as usual (model.pt, optimizer.pt: what
// eval and export read), rank r's under the file prefix "local_sgd_rank_<r>_" with its tensor names
// prefixed "local_sgd_rank_<r>/" (names stay unique across files), and local_sgd.pt (the
// counters; nesterov's anchor and momentum).
#include <ATen/core/grad_mode.h>
#include <stdlib.h>

#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/engine/engine.h"
#include "xtrain/optim/registry.h"
#include "xtrain/parallel/data/local_sgd.h"

namespace xtrain {
namespace {
std::string rank_prefix(int rank) { return c10::str("local_sgd_rank_", rank, "_"); }

// A temporary folder for one rank's strategy files, removed on scope exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "xtrain-local-sgd-XXXXXX").string();
    XTRAIN_USAGE_CHECK(::mkdtemp(tmpl.data()) != nullptr, "local_sgd: cannot make a temporary folder like ", tmpl);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// Every file of `from` into `to` as file_add + name; tensor names lose `strip` and gain `add`.
void copy_renamed(const checkpoint::CheckpointReader& from, checkpoint::CheckpointWriter& to, const std::string& file_add,
                  const std::string& add, const std::string& strip) {
  for (const auto& file : from.files()) {
    if (from.kind(file) != "tensors") {
      to.write_text(file_add + file, from.read_text(file));
      continue;
    }
    auto tensors = from.read_tensors(file);
    for (auto& [name, t] : tensors) {
      if (!strip.empty() && name.rfind(strip, 0) == 0) name = name.substr(strip.size());
      name = add + name;
    }
    to.write_tensors(file_add + file, tensors);
  }
}
}  // namespace

void check_local_sgd(const config::Config& c) {
  if (!c.local_sgd.enabled()) return;
  const std::string who = "engine: xtrain.local_sgd.sync_every > 0 replaces the gradient all-reduce with a "
                          "parameter average every few steps";
  XTRAIN_USAGE_CHECK(c.zero_optimization.stage == 0, who, "; each rank keeps its whole optimizer state, so ",
                     "zero_optimization.stage must be 0, got ", c.zero_optimization.stage);
  XTRAIN_USAGE_CHECK(c.tensor_parallel.size == 1, who, " over data-parallel ranks only: tensor_parallel.size must ",
                     "be 1, got ", c.tensor_parallel.size);
  XTRAIN_USAGE_CHECK(c.pipeline.stages == 1, who, " over data-parallel ranks only: pipeline.stages must be 1, got ",
                     c.pipeline.stages);
  XTRAIN_USAGE_CHECK(!c.fp16.enabled, who, "; fp16 loss scaling skips steps on one rank and not another, which ",
                     "would desynchronise the intervals: set fp16.enabled false");
  XTRAIN_USAGE_CHECK(!c.bf16.enabled, who, " of the fp32 parameters the optimizer updates; bf16 keeps a separate ",
                     "master copy: set bf16.enabled false (amp with bf16 autocast works)");
  XTRAIN_USAGE_CHECK(!optim::find_optimizer(c.optimizer.type).needs_closure, who, "; optimizer ", c.optimizer.type,
                     " re-evaluates the loss within its step: use another optimizer.type");
}

std::shared_ptr<comm::Communicator> Engine::gradient_group() const {
  return config_.local_sgd.enabled() ? comm::Communicator::single() : dp_;
}

void Engine::start_local_sgd() {
  if (!config_.local_sgd.enabled()) return;
  std::vector<at::Tensor> params;
  for (const auto& [name, p] : params_) params.push_back(p);
  local_sgd_ = std::make_unique<parallel::LocalSgd>(config_.local_sgd, std::move(params), dp_);
}

int64_t Engine::comm_bytes() const { return dp_->stats().sent_bytes; }

// Rank r > 0: the strategy's files (written to a scratch checkpoint) under the file prefix
// "local_sgd_rank_<r>_", their tensors renamed "local_sgd_rank_<r>/<name>" so that no tensor name
// appears in two files (checkpoint::fingerprint needs unique names).
void Engine::save_local_sgd(checkpoint::CheckpointWriter& writer) const {
  const int rank = dp_->rank();
  if (rank == 0) {
    strategy_->save(writer);
    writer.write_tensors("local_sgd.pt", local_sgd_->state_tensors());
    return;
  }
  const ScratchDir scratch;
  {
    checkpoint::CheckpointWriter w(scratch.path, "rank", 0);
    strategy_->save(w);  // its group is this rank alone: it writes on every rank
    w.finish_rank();
    w.commit();
  }
  copy_renamed(checkpoint::CheckpointReader(scratch.path, "rank"), writer, rank_prefix(rank),
               c10::str("local_sgd_rank_", rank, "/"), "");
}

// A checkpoint without this rank's files (written by plain data parallelism, or by fewer ranks)
// gives every rank rank 0's parameters and optimizer state.
void Engine::load_local_sgd(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  const int rank = dp_->rank();
  if (rank != 0 && reader.has_file(rank_prefix(rank) + "model.pt")) {
    const ScratchDir scratch;
    {
      checkpoint::CheckpointWriter w(scratch.path, "rank", 0);
      copy_renamed(reader.scoped(rank_prefix(rank)), w, "", "", c10::str("local_sgd_rank_", rank, "/"));
      w.finish_rank();
      w.commit();
    }
    strategy_->load(checkpoint::CheckpointReader(scratch.path, "rank"), load_optimizer);
  } else {
    strategy_->load(reader, load_optimizer);
  }
  if (load_optimizer && reader.has_file("local_sgd.pt")) {
    local_sgd_->load_state(reader.read_tensors("local_sgd.pt"));
  } else {
    local_sgd_->restart();
  }
}

}  // namespace xtrain
