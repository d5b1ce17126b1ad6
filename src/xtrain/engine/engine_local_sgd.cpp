// The engine's side of xtrain.local_sgd (parallel/data/local_sgd.h): the strategy reduces over a
// group of one, so no gradient crosses ranks; LocalSgd synchronises the parameters every
// sync_every steps. Between synchronisations the ranks hold different parameters and optimizer
// states, so a checkpoint keeps each rank's own: rank 0's as usual (model.pt, optimizer.pt: what
// eval and export read), rank r's under the file prefix "local_sgd_rank_<r>_" with its tensor names
// prefixed "local_sgd_rank_<r>/" (names stay unique across files), and local_sgd.pt (the
// counters; nesterov's anchor and momentum).
#include <ATen/core/grad_mode.h>


#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/engine/engine.h"
#include "xtrain/optim/registry.h"
#include "xtrain/parallel/data/local_sgd.h"

namespace xtrain {
namespace {
// Rank r > 0 keeps its own parameters and optimizer state: files "local_sgd_rank_<r>_*", tensors
// "local_sgd_rank_<r>/<name>", so that no tensor name appears in two files (fingerprint()).
std::string rank_file_prefix(int rank) { return c10::str("local_sgd_rank_", rank, "_"); }
std::string rank_tensor_prefix(int rank) { return c10::str("local_sgd_rank_", rank, "/"); }
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

// Rank r > 0: the strategy's files under this rank's file and tensor scope.
void Engine::save_local_sgd(checkpoint::CheckpointWriter& writer) const {
  const int rank = dp_->rank();
  if (rank == 0) {
    strategy_->save(writer);
    writer.write_tensors("local_sgd.pt", local_sgd_->state_tensors());
    return;
  }
  const auto [files, tensors] = writer.scope();
  writer.set_scope(files + rank_file_prefix(rank), tensors + rank_tensor_prefix(rank));
  strategy_->save(writer);  // its group is this rank alone: it writes on every rank
  writer.set_scope(files, tensors);
}

// A checkpoint without this rank's files (written by plain data parallelism, or by fewer ranks)
// gives every rank rank 0's parameters and optimizer state.
void Engine::load_local_sgd(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  const int rank = dp_->rank();
  if (rank != 0 && reader.has_file(rank_file_prefix(rank) + "model.pt")) {
    strategy_->load(reader.scoped(rank_file_prefix(rank), rank_tensor_prefix(rank)), load_optimizer);
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
