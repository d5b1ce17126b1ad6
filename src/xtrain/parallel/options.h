// `pipeline` (DeepSpeed's engine-level keys, §a.14, plus xtrain's `schedule`) and
// `tensor_parallel` (ours: `size`; DeepSpeed's `autotp_size`, its AutoTP degree, is the same number
// under DeepSpeed's name: it sets `size`, and a different `size` is an error).
#pragma once
#include <cstdint>
#include <string>

#include "xtrain/base/error.h"

namespace xtrain::parallel {

struct PipelineOptions {
  int64_t stages = 1;  // "auto" resolves to 1
  std::string partition = "parameters";  // uniform | parameters
  std::string schedule = "1f1b";        // 1f1b | gpipe
  bool seed_layers = false;
  int64_t activation_checkpoint_interval = 0;
  bool pipe_partitioned = true;
  bool grad_partitioned = true;
  template <class V>
  void visit(V& v) {
    v("stages", stages, "pipeline stages (PP)");
    v.choice("partition", partition, {"uniform", "parameters", "best"}, "how layers are split among stages");
    v.choice("schedule", schedule, {"1f1b", "gpipe"}, "xtrain: micro-batch schedule");
    v("seed_layers", seed_layers, "accepted for compatibility");
    v("activation_checkpoint_interval", activation_checkpoint_interval, "checkpoint every N layers (0: off)");
    v("pipe_partitioned", pipe_partitioned, "accepted for compatibility");
    v("grad_partitioned", grad_partitioned, "accepted for compatibility");
  }
};

struct TensorParallelOptions {
  int64_t size = 1;
  int64_t autotp_size = 0;
  template <class V>
  void visit(V& v) {
    v("size", size, "xtrain: tensor-parallel ranks (TP)");
    v("autotp_size", autotp_size, "DeepSpeed's AutoTP degree: the tensor-parallel size (0: unset)");
    if (!v.documenting() && autotp_size != 0) {
      XTRAIN_USAGE_CHECK(autotp_size > 0, "config: tensor_parallel.autotp_size must be > 0 (0: unset), got ", autotp_size);
      XTRAIN_USAGE_CHECK(size == 1 || size == autotp_size, "config: tensor_parallel.autotp_size (", autotp_size,
                         ") and tensor_parallel.size (", size, ") disagree: both are the tensor-parallel size; set one");
      size = autotp_size;
    }
  }
};

// `xtrain.local_sgd` (ours; DeepSpeed has no local SGD): data-parallel ranks take `sync_every`
// optimizer steps without a gradient all-reduce, then synchronise their parameters: the mean
// ("average": local SGD, Lin et al. 2020) or an outer Nesterov SGD step on the averaged change since
// the last synchronisation (DiLoCo, Douillard et al. 2023: outer lr 0.7, momentum 0.9).
struct OuterOptimizerOptions {
  std::string type = "average";  // average | nesterov
  double lr = 0.7;
  double momentum = 0.9;
  template <class V>
  void visit(V& v) {
    v.choice("type", type, {"average", "nesterov"},
             "xtrain: average = mean of the ranks' parameters; nesterov = DiLoCo's outer Nesterov step");
    v("lr", lr, "xtrain: outer learning rate (nesterov)");
    v("momentum", momentum, "xtrain: outer Nesterov momentum (nesterov)");
    if (!v.documenting()) {
      XTRAIN_USAGE_CHECK(lr > 0, "config: xtrain.local_sgd.outer_optimizer.lr must be > 0, got ", lr);
      XTRAIN_USAGE_CHECK(momentum >= 0 && momentum < 1,
                         "config: xtrain.local_sgd.outer_optimizer.momentum must be in [0, 1), got ", momentum);
    }
  }
};

struct LocalSgdOptions {
  int64_t sync_every = 0;  // H; 0: off (plain data parallelism)
  OuterOptimizerOptions outer_optimizer;
  bool enabled() const { return sync_every > 0; }
  template <class V>
  void visit(V& v) {
    v("sync_every", sync_every, "xtrain: local optimizer steps between parameter synchronisations (0: off)");
    v("outer_optimizer", outer_optimizer, "xtrain: how the ranks' parameters are combined");
    if (!v.documenting()) {
      XTRAIN_USAGE_CHECK(sync_every >= 0, "config: xtrain.local_sgd.sync_every must be >= 0 (0: off), got ", sync_every);
    }
  }
};

}  // namespace xtrain::parallel
