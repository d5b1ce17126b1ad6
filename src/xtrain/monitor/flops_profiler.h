// The `flops_profiler` table: per module, parameters, forward FLOPs and forward time of one
// forward pass. C++ modules have no forward hooks, so this observes ATen instead: a thread-local
// RecordFunction callback sees every op the forward runs, counts FLOPs of matrix products and
// convolutions from their input shapes (flops.h's convention), times the outermost ops, and gives
// each op to the module owning a parameter among its inputs (by address range, so views of
// parameters and parameters inside flat buffers count, and so do copies of a parameter the
// forward makes, such as autocast's casts); ops with no parameter input (attention scores,
// activations, residual adds, the loss) go to the module enclosing the last leaf module that had
// one (after attn.qkv: attn). xtrain's GEMM and attention kernels run outside ATen's ops (oneDNN,
// fused loops), so they record themselves: "xtrain::gemm" (a, b) and "xtrain::attention" (q, k,
// v, causal, windows), dense attention counted over the full T×T, multi-scale over the pooled keys
// each query sees; "xtrain::attention_2d" (q, k, v, windows, grid, class token, (query, key) pairs
// per batch element) for the 2-D multi-scale attention. Reference:
// DeepSpeed's FlopsProfiler (profile at `profile_step`, `module_depth`, `top_modules`, `detailed`).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/monitor/options.h"

namespace torch::nn {
class Module;
}

namespace xtrain::monitor {

struct ModuleProfile {
  std::string name;  // dotted path ("blocks.0.attn"); "" for the model itself
  std::string type;  // class name without namespace and "Impl": "Linear", "CausalSelfAttention"
  int depth = 0;     // 0 for the model
  int64_t params = 0;  // distinct parameter elements in the subtree
  double flops = 0;    // forward FLOPs of the subtree
  double seconds = 0;  // forward time of the subtree (this thread's ATen ops)
};

class FlopsProfiler {
 public:
  // Maps `model`'s parameters to their modules; the model must outlive the profiler.
  explicit FlopsProfiler(const torch::nn::Module& model);
  ~FlopsProfiler();
  FlopsProfiler(const FlopsProfiler&) = delete;
  FlopsProfiler& operator=(const FlopsProfiler&) = delete;

  // Observe the ops this thread runs between start() and stop() (one profiler per thread).
  void start();
  void stop();
  void reset();

  // Every module in pre-order (parents before children), with subtree totals.
  std::vector<ModuleProfile> modules() const;
  double forward_flops() const;
  double forward_seconds() const;

  // DeepSpeed-style report: totals (training FLOPs = forward × (3 + recompute_fwd_factor)), the
  // `top_modules` slowest modules at each depth up to `module_depth` (-1: all), and with
  // `detailed` the whole tree to that depth.
  std::string table(const FlopsProfilerOptions& options, int64_t step) const;

  struct State;  // the callback's view; public only for the .cpp's free functions

 private:
  std::unique_ptr<State> state_;
  uint64_t handle_ = 0;
};

}  // namespace xtrain::monitor
