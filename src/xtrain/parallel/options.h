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

}  // namespace xtrain::parallel
