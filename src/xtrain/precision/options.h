// `fp16`, `bf16` (alias `bfloat16`), `amp`, and xtrain's `tf32` — DeepSpeed's keys and defaults
// (reference/deepspeed.md §a.4–a.5).
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::precision {

struct Fp16Options {
  bool enabled = false;
  bool auto_cast = false;
  double loss_scale = 0.0;  // 0: dynamic
  int64_t initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;
  bool fp16_master_weights_and_grads = false;
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "train with fp16 parameters and activations, fp32 master weights");
    v("auto_cast", auto_cast, "fp32 parameters, fp16 compute inside autocast regions");
    v("loss_scale", loss_scale, "static loss scale; 0 = dynamic");
    v("initial_scale_power", initial_scale_power, "dynamic scale starts at 2^this");
    v("loss_scale_window", loss_scale_window, "clean steps before the scale doubles");
    v("hysteresis", hysteresis, "overflows tolerated before the scale halves");
    v("consecutive_hysteresis", consecutive_hysteresis, "refill hysteresis on every clean step");
    v("min_loss_scale", min_loss_scale, "the scale never goes below this; overflow there stops the run");
    v("fp16_master_weights_and_grads", fp16_master_weights_and_grads, "not supported");
  }
};

struct Bf16Options {
  bool enabled = false;
  bool immediate_grad_update = false;
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "train with bf16 parameters and activations, fp32 master weights");
    v("immediate_grad_update", immediate_grad_update, "accepted for compatibility");
  }
};

// DeepSpeed's apex `amp` section; xtrain maps `amp.enabled` to native autocast (our meaning:
// fp32 parameters, bf16 (CPU) or fp16 (CUDA) compute inside autocast regions).
struct AmpOptions {
  bool enabled = false;
  std::string dtype = "auto";  // xtrain: "auto" = bf16 on CPU, fp16 on CUDA
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "autocast: fp32 parameters, low-precision compute");
    v.choice("dtype", dtype, {"auto", "bf16", "fp16"}, "xtrain: autocast dtype");
  }
};

struct Tf32Options {
  bool enabled = false;
  template <class V>
  void visit(V& v) { v("enabled", enabled, "xtrain: TF32 matmul on CUDA (no effect on CPU)"); }
};

}  // namespace xtrain::precision
