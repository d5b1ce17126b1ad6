// The built-in attention kernels and when each applies. Priorities: CUDA fused 30 > CPU fused 20 >
// composite 10 > the multi-scale references 0 (O(T²) memory: only where nothing else runs). The 1-D
// multi-scale kernels refuse 2-D calls (grid2d()); dense kernels take them (no windows: the grid
// does not change dense attention).
#include "xtrain/kernels/attention/builtin_kernels.h"

#include "xtrain/kernels/attention/dense_reference.h"
#include "xtrain/kernels/attention/flash_cpu.h"
#include "xtrain/kernels/ms_attention/ms_attention_2d_cpu.h"
#include "xtrain/kernels/ms_attention/ms_attention_cpu.h"
#include "xtrain/kernels/ms_attention/reference.h"
#include "xtrain/kernels/ms_attention/reference_2d.h"
#if defined(XTRAIN_WITH_CUDA)
#include "xtrain/kernels/ms_attention/cuda/ms_attention_2d_cuda.h"
#include "xtrain/kernels/ms_attention/cuda/ms_attention_cuda.h"
#endif

namespace xtrain::kernels::attention {

namespace {

bool cpu_fused_dtype(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::BFloat16 || t == c10::ScalarType::Double;
}

// What plain ATen ops can run: on the CPU no fp16 matmul/softmax (reference/platform.md).
bool aten_dtype(const AttentionCall& c) {
  if (c.device.is_cpu()) return cpu_fused_dtype(c.dtype);
  return c.dtype == c10::ScalarType::Half || cpu_fused_dtype(c.dtype);
}

AttentionPriority constant(int p) {
  return [p](const AttentionCall&) { return p; };
}

}  // namespace

void add_builtin_kernels(const AddKernel& add) {
  add(
      "dense_composite",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return dense_attention_composite(q, k, v, c.causal, c.dropout, c.dropout > 0);
      },
      [](const AttentionCall& c) { return !c.multiscale() && aten_dtype(c); }, constant(10));
  add(
      "dense_flash_cpu",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return flash_attention_cpu(q, k, v, c.causal, c.dropout);
      },
      [](const AttentionCall& c) { return !c.multiscale() && c.device.is_cpu() && cpu_fused_dtype(c.dtype); },
      constant(20));
  add(
      "ms_reference",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return ms_attention::ms_attention_reference(q, k, v, c.windows, c.causal, c.dropout,
                                                    c.dropout > 0 ? draw_dropout_seed() : 0);
      },
      [](const AttentionCall& c) { return c.multiscale() && !c.grid2d() && aten_dtype(c); }, constant(0));
  add(
      "ms_fused_cpu",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return ms_attention::ms_attention_cpu(q, k, v, c.windows, c.causal, c.dropout);
      },
      [](const AttentionCall& c) {
        return c.multiscale() && !c.grid2d() && c.device.is_cpu() && cpu_fused_dtype(c.dtype);
      },
      constant(20));
  add(
      "ms2d_reference",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return ms_attention::ms_attention_2d_reference(q, k, v, c.windows, c.grid_h, c.grid_w, c.cls_token);
      },
      [](const AttentionCall& c) { return c.multiscale() && c.grid2d() && c.dropout == 0 && aten_dtype(c); },
      constant(0));
  add(
      "ms2d_fused_cpu",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return ms_attention::ms_attention_2d_cpu(q, k, v, c.windows, c.grid_h, c.grid_w, c.cls_token, c.dropout);
      },
      [](const AttentionCall& c) {
        return c.multiscale() && c.grid2d() && c.device.is_cpu() && cpu_fused_dtype(c.dtype);
      },
      constant(20));
#if defined(XTRAIN_WITH_CUDA)
  add(
      "ms_fused_cuda",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return ms_attention::ms_attention_cuda(q, k, v, c.windows, c.causal, c.dropout);
      },
      [](const AttentionCall& c) {
        return c.multiscale() && !c.grid2d() && c.device.is_cuda() && ms_attention::cuda_supports(c.HS, c.dtype);
      },
      constant(30));
  add(
      "ms2d_fused_cuda",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& c) {
        return ms_attention::ms_attention_2d_cuda(q, k, v, c.windows, c.grid_h, c.grid_w, c.cls_token, c.dropout);
      },
      [](const AttentionCall& c) {
        return c.multiscale() && c.grid2d() && c.device.is_cuda() && ms_attention::cuda_supports(c.HS, c.dtype);
      },
      constant(30));
#endif
}

}  // namespace xtrain::kernels::attention
