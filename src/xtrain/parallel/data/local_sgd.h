// LocalSgd: the parameter synchronisation of local SGD and DiLoCo over the data-parallel group.
// The engine runs its strategy on a group of one (no gradient all-reduce, each rank's optimizer
// state stays its own) and calls after_step() after every optimizer step; every `sync_every` steps
// the ranks combine their parameters in one flat fp32 all-reduce: the mean ("average", Lin et al.
// 2020, "Don't use large mini-batches, use local SGD"), or DiLoCo's outer step (Douillard et al.
// 2023): outer gradient = anchor - mean, Nesterov SGD on the anchor (torch.optim.SGD with
// nesterov=True, dampening 0), every rank set to the new anchor.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/parallel/options.h"

namespace xtrain::comm {
class Communicator;
}

namespace xtrain::parallel {

class LocalSgd {
 public:
  // `params`: the tensors the inner optimizer updates in place (fp32). Collective: rank 0's values
  // are broadcast to every rank (the strategy on a group of one did not) and become the anchor.
  LocalSgd(const LocalSgdOptions& options, std::vector<at::Tensor> params, std::shared_ptr<comm::Communicator> dp);

  // After each optimizer step; returns true when this step ended an interval and the ranks synchronised.
  bool after_step();
  void synchronise();

  int64_t steps_since_sync() const { return steps_since_sync_; }
  int64_t syncs() const { return syncs_; }
  int64_t numel() const { return numel_; }
  const LocalSgdOptions& options() const { return options_; }

  // What resuming needs besides each rank's parameters and inner optimizer state (identical on every
  // rank): "counters" (steps since the last synchronisation, synchronisations so far) and, for
  // nesterov, "anchor" and "momentum" (flat fp32).
  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const;
  // A UsageError names what does not fit (a checkpoint of another model, or written without nesterov).
  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& tensors);
  // A new interval from the current parameters (after loading weights without local_sgd.pt): the
  // anchor is the parameters, the momentum and the counters zero. Every rank must hold the same ones.
  void restart();

 private:
  at::Tensor flat_params() const;  // the parameters concatenated (a copy, fp32)
  void write_params(const at::Tensor& flat);

  LocalSgdOptions options_;
  std::vector<at::Tensor> params_;
  std::shared_ptr<comm::Communicator> dp_;
  int64_t numel_ = 0;
  at::Tensor anchor_;    // nesterov: the parameters after the last synchronisation
  at::Tensor momentum_;  // nesterov: the outer momentum buffer (zeros = torch's first-step clone)
  int64_t steps_since_sync_ = 0;
  int64_t syncs_ = 0;
};

}  // namespace xtrain::parallel
