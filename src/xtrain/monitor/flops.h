// Model FLOPs: the closed form for transformer training (PaLM, Chowdhery et al. 2022, appendix B;
// Kaplan et al. 2020 §2.1 plus the attention term), a measured peak of this machine's GEMMs, and
// model FLOPs utilisation. Convention: only matrix products count (2 FLOPs per multiply-add), the
// backward pass costs twice the forward, causal attention is counted over the full T×T (as PaLM
// and nanoGPT's MFU do), and activation recomputation does not count (it is not model FLOPs).
#pragma once
#include <c10/core/Device.h>

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

// "3.29M", "20.13G", "512" (SI prefixes, 4 significant digits).
std::string si(double value);

}  // namespace xtrain::monitor
