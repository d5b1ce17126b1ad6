// `pipeline` (DeepSpeed's engine-level keys, §a.14, plus xtrain's `schedule`) and
// `tensor_parallel` (ours: `size`; DeepSpeed's autotp keys are accepted).
#pragma once
#include <cstdint>
#include <string>

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
    v("autotp_size", autotp_size, "DeepSpeed AutoTP (inference); use size");
  }
};

}  // namespace xtrain::parallel
