// The optimizer registry: name -> how to build the optimizer, what state it keeps and where ZeRO may
// run it, plus its config half (config::OptimizerType: params read/written/documented, checks, lr,
// weight decay). Adding an optimizer is one file that defines its Optimizer and an OptimizerEntry,
// and one register_optimizer() call (tests/optim/registry_test.cpp does it with plain gradient
// descent). Built-ins (Adam, AdamW, Lamb, SGD) are added on first use. Reference: DeepSpeed's
// optimizer name table (deepspeed/runtime/engine.py) and its ZeRO-supported list.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/config/optimizer_types.h"
#include "xtrain/optim/optimizer.h"
#include "xtrain/optim/options.h"

namespace xtrain::optim {

// ZeRO (stages 1-3) steps the optimizer on each rank's shard of the flat buffers.
enum class ZeroSupport {
  tested,       // parity tests run under ZeRO
  untested,     // runs with zero_allow_untested_optimizer (as DeepSpeed)
  unsupported,  // cannot run on a shard (zero_reason says why)
};

struct OptimizerEntry {
  config::OptimizerType config;          // name, description, params, checks, lr, weight decay
  std::vector<std::string> state_names;  // flat state tensors, each as long as the parameters
  ZeroSupport zero = ZeroSupport::untested;
  std::string zero_reason;       // for unsupported: why a shard cannot step alone
  bool nvme_offload = true;      // a chunk of the flat state can step alone (NVMe offload)
  bool needs_closure = false;    // steps through StepInputs::closure (the engine re-runs the loss)
  // Builds the optimizer; checks its own params (UsageError naming optimizer.params.<key>).
  std::function<std::unique_ptr<Optimizer>(const OptimizerOptions&)> make;
};

// Adds (or replaces) `entry` under entry.config.name, in this registry and in the config reader's
// (config::optimizer_types()), so the name works in ds_config.json at once.
void register_optimizer(OptimizerEntry entry);
// Takes a registered optimizer out of both registries (tests); false when unknown.
bool unregister_optimizer(const std::string& name);
// The entry of a registered name (as normalised by the config reader), or a UsageError naming
// optimizer.type, the closest name and the list.
const OptimizerEntry& find_optimizer(const std::string& type);
std::vector<std::string> optimizer_names();

// "Adam, AdamW and, with zero_allow_untested_optimizer, SGD": what ZeRO runs, for messages.
std::string zero_support_summary();

// Checks shared by entries (UsageError naming optimizer.params.<key>).
void check_betas(const std::vector<double>& betas);
void check_eps(double eps);

// The built-ins, one per file (adam.cpp, lamb.cpp, sgd.cpp).
OptimizerEntry adam_entry();
OptimizerEntry adamw_entry();
OptimizerEntry lamb_entry();
OptimizerEntry sgd_entry();
OptimizerEntry lbfgs_entry();  // lbfgs.cpp

}  // namespace xtrain::optim
