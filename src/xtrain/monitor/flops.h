// Model FLOPs: the closed form for transformer training (PaLM, Chowdhery et al. 2022, appendix B;
// Kaplan et al. 2020 §2.1 plus the attention term), a measured peak of this machine's GEMMs, and
// model FLOPs utilisation. Convention: only matrix products count (2 FLOPs per multiply-add), the
// backward pass costs twice the forward, causal attention is counted over the full T×T (as PaLM
// and nanoGPT's MFU do), and activation recomputation does not count (it is not model FLOPs).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>

namespace xtrain::monitor {

// 6·N + 12·L·T·C per token: N = parameters that take part in matrix products (everything but
// the embedding tables, plus the LM head's V·C whether tied or not), L layers, T the sequence
// length attended over, C the model width.
double transformer_training_flops_per_token(double matmul_params, int64_t layers, int64_t seq_len, int64_t d_model);

// The same for the GPT layout of models/gpt.h (fused qkv C->3C, proj C->C, MLP C->4C->C, LM head
// V·C): N = 12·L·C² + V·C, the weights of the matrix products — exactly what FlopsProfiler
// measures. Biases and LayerNorm parameters are left out (additions, not multiply-adds); PaLM's N
// (models::gpt_flops_per_token) includes them, 6·(13·L·C + 2·C) more per token, ~0.4% at C=256.
double gpt_training_flops_per_token(int64_t layers, int64_t d_model, int64_t seq_len, int64_t vocab);

struct PeakFlops {
  double fp32 = 0;  // FLOP/s of the GEMM on n×n fp32 matrices
  double bf16 = 0;  // 0 when bf16 matmul is not available on the device
  int64_t n = 0;
  std::string gemm = "at::matmul";  // what was timed
  std::string describe() const;  // "fp32 112.4 GFLOP/s, bf16 371.0 GFLOP/s (at::matmul 1024^3)"
};

// c = a·b into an existing c: the GEMM the model's layers use (the engine passes xtrain's routed
// kernels::gemm_out; empty: at::matmul_out).
using GemmFn = std::function<void(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b)>;

// Times the GEMM on n×n matrices (n = 0: 1024 on CPU, 8192 on CUDA) after one warm-up call;
// about 0.1-0.5 s on a CPU. What the layers' own GEMM reaches is the honest ceiling for them.
PeakFlops measure_peak_flops(c10::Device device = c10::Device(c10::kCPU), int64_t n = 0, const GemmFn& gemm = {},
                             const std::string& gemm_name = "at::matmul");

// Model FLOPs utilisation: achieved model FLOP/s over the peak; 0 when the peak is unknown.
double mfu(double model_flops_per_step, double step_seconds, double peak_flops_per_second);

// --- The MFU peak, measured robustly and cached per machine (flops_peak.cpp) -----------------------
// One measurement at start moved 112-152 GFLOP/s between runs here and showed MFU at 154%. So the
// peak is the best of several GEMM shapes and repetitions for the dtype in use, stored in a JSON
// file keyed by everything that changes it, and reused; a training rate above it raises it.

// What a peak depends on. str() is the cache key.
struct PeakKey {
  std::string cpu;       // /proc/cpuinfo "model name" (CPU), or the device ("cuda:0")
  int64_t cores = 0;     // online CPUs
  int64_t threads = 0;   // ATen intra-op threads when measured
  std::string dtype;     // "fp32" | "bf16"
  std::string gemm;      // the GEMM timed ("xtrain gemm", "at::matmul")
  std::string versions;  // LibTorch, oneDNN, and the BLAS library loaded (with the kernel it picked)
  std::string str() const;
};
// The key for this process as it runs now.
PeakKey peak_key(c10::Device device, c10::ScalarType dtype, const std::string& gemm_name);

// The best rate of `gemm` over several shapes (square 512-2048 and transformer-like rectangles)
// and repetitions (best of 5 batches of >= 20 ms each); `shape` names the winner ("2048x768x768").
struct GemmPeak {
  double flops = 0;  // FLOP/s
  std::string shape;
};
GemmPeak measure_gemm_peak(c10::Device device, c10::ScalarType dtype, const GemmFn& gemm = {});
// One shape ("MxKxN"; anything else: 1024^3), best of `batches` batches: the quick check of a
// cached peak at start.
double measure_gemm_shape(c10::Device device, c10::ScalarType dtype, const GemmFn& gemm, const std::string& shape,
                          int batches = 3);

// $XTRAIN_CACHE_DIR/peak_flops.json, else $XDG_CACHE_HOME/xtrain/..., else ~/.cache/xtrain/...;
// "" when none of them is set.
std::string default_peak_cache_path();

// The cache file: {"version": 1, "entries": {key: {"flops", "source", "detail", "shape", "key"}}}. A
// missing or unreadable file is empty; store() keeps the higher of the stored and the new value
// and rewrites the file atomically (temporary file + rename), so ranks writing at once leave one
// whole file. Failures to write are logged, not thrown. Delete the file to measure afresh.
struct CachedPeak {
  double flops = 0;   // FLOP/s; 0 when absent
  std::string source;  // "gemm" (measured) or "training" (a training rate above the peak)
  std::string shape;   // the GEMM shape that reached the best measured rate
};
class PeakCache {
 public:
  explicit PeakCache(std::string path) : path_(std::move(path)) {}
  CachedPeak entry(const PeakKey& key) const;
  double find(const PeakKey& key) const { return entry(key).flops; }
  // `shape` "" keeps the stored one.
  void store(const PeakKey& key, double flops, const std::string& source, const std::string& detail,
             const std::string& shape = "") const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The peak for `key`: the cached one, or `measure()` stored under `key` ("gemm" source). A cached
// peak is checked by `probe(shape)` (the rate of its best shape now): a probe more than 5% above
// it means the cached value was measured on a busy machine (or the library got faster), so the
// full measurement runs again and the best of both is stored. Without a probe the cache is trusted.
struct ResolvedPeak {
  double flops = 0;
  bool measured = false;  // false: read from the cache
  std::string detail;     // what happened, for the log
};
ResolvedPeak resolve_peak(const PeakKey& key, const PeakCache& cache, const std::function<GemmPeak()>& measure,
                          const std::function<double(const std::string& shape)>& probe = {});

// "3.29M", "20.13G", "512" (SI prefixes, 4 significant digits).
std::string si(double value);

}  // namespace xtrain::monitor
