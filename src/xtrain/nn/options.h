// `activation_checkpointing` — DeepSpeed's keys (reference/deepspeed.md §a.9). xtrain inserts the
// checkpoints itself (per block) instead of asking the model to call a checkpoint function.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::nn {

struct ActivationCheckpointingOptions {
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  int64_t number_checkpoints = -1;  // -1 (null): every block when enabled
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
  bool enabled = false;  // xtrain: DeepSpeed has no switch; checkpointing is on when this is true
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "xtrain: checkpoint transformer blocks (recompute in backward)");
    v("partition_activations", partition_activations, "shard saved inputs across tensor-parallel ranks");
    v("cpu_checkpointing", cpu_checkpointing, "keep saved inputs in CPU memory");
    v("contiguous_memory_optimization", contiguous_memory_optimization, "accepted for compatibility");
    v("number_checkpoints", number_checkpoints, "blocks to checkpoint (-1: all)");
    v("synchronize_checkpoint_boundary", synchronize_checkpoint_boundary, "device synchronise at boundaries");
    v("profile", profile, "time checkpointed blocks");
  }
};

// `xtrain.model.attention` (ours): the attention a transformer Block runs (nn::make_attention).
struct AttentionOptions {
  std::string type = "dense";  // dense | multiscale
  std::vector<int64_t> windows = {8, 16, 32};
  std::string kernel = "auto";  // a registered kernel name, or "auto"
  template <class V>
  void visit(V& v) {
    v.choice("type", type, {"dense", "multiscale"}, "attention algorithm");
    v("windows", windows, "multiscale: window sizes; heads are split among them as evenly as possible");
    v("kernel", kernel, "kernel name from the registry, or auto (fastest that supports the call)");
  }
};

// `xtrain.loss` (ours): the training loss.
struct LossOptions {
  std::string type = "cross_entropy";  // a registered loss (nn/losses_registry.h): cross_entropy | focal
  double label_smoothing = 0.0;
  double gamma = 2.0;                  // focal
  std::vector<double> alpha;           // focal: per-class weights (empty: none)
  template <class V>
  void visit(V& v) {
    v("type", type, "training loss: cross_entropy | focal | a loss added with nn::register_loss");
    v("label_smoothing", label_smoothing, "cross_entropy: mass spread uniformly over classes");
    v("gamma", gamma, "focal: focusing exponent (0 = cross-entropy)");
    v("alpha", alpha, "focal: per-class weights (empty: none)");
  }
};

}  // namespace xtrain::nn
