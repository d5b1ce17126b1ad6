// The attention kernel registry: name -> (implementation, supports(call), priority). Config names a
// kernel or says "auto": the highest-priority registered kernel whose supports() accepts the call.
// Built-ins (registered on first use): dense_composite (LibTorch ops, any device), dense_flash_cpu,
// ms_reference (the O(T²) spec, any device, last resort), ms_fused_cpu, and ms_fused_cuda when
// LibTorch has CUDA; for 2-D calls ms2d_reference (O(T²), last resort) and the fused 2-D kernels. Design choice: priorities are declared, not measured at run time, so "auto" is
// deterministic; a kernel that only wins on some shapes says so in supports(). Users register
// their own kernels the same way. Reference: PyTorch's scaled_dot_product_attention backend choice.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace xtrain::kernels::attention {

// What a kernel is asked to compute; supports() decides from this alone.
struct AttentionCall {
  int64_t B = 0, NH = 0, T = 0, HS = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::kCPU);
  bool causal = true;
  std::vector<int64_t> windows;  // multi-scale windows (heads split as evenly as possible); empty: dense
  double dropout = 0.0;          // on the attention weights; 0 outside training
  // 2-D (image patch grid, docs/design/multiscale-attention-2d.md): T = grid_h·grid_w (+1 with a
  // class token, token 0), patches row-major; always bidirectional (causal = false). grid_h == 0:
  // a 1-D call. Dense kernels take a 2-D call without windows (the grid does not change dense
  // attention); a multi-scale kernel must say it supports grid2d().
  int64_t grid_h = 0, grid_w = 0;
  bool cls_token = false;
  bool multiscale() const { return !windows.empty(); }
  bool grid2d() const { return grid_h > 0; }
};

// "multiscale causal B=2 NH=8 T=1024 HS=64 float cpu windows=[8,16] dropout=0"; a 2-D call adds
// " grid=14x14+cls".
std::string describe(const AttentionCall& call);

// q, k, v: [B, NH, T, HS] (any strides) -> [B, NH, T, HS] (any strides), differentiable in q, k, v.
using AttentionImpl = std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const AttentionCall& call)>;
using AttentionSupports = std::function<bool(const AttentionCall& call)>;
using AttentionPriority = std::function<int(const AttentionCall& call)>;

// Registers `name`, replacing a kernel of that name. "auto" is reserved. Ties in priority go to the
// kernel registered first.
void register_attention_kernel(const std::string& name, AttentionImpl impl, AttentionSupports supports,
                               int priority = 0);
// A priority that depends on the call (a kernel that wins only above some T, say).
void register_attention_kernel(const std::string& name, AttentionImpl impl, AttentionSupports supports,
                               AttentionPriority priority);
bool unregister_attention_kernel(const std::string& name);  // false when unknown
// Every registered name, highest priority first.
std::vector<std::string> attention_kernel_names();

// The kernel `name` ("auto" or a registered name) would run for `call`. UsageError when the name is
// unknown (with the closest name), the named kernel does not support the call, or none does; the
// message lists the kernels and the call (key: xtrain.model.attention.kernel).
std::string select_attention_kernel(const std::string& name, const AttentionCall& call);

// Checks the call's own arguments: positive sizes, windows (ms_attention/windows.h), dropout, and
// for a 2-D call the grid (T = grid_h·grid_w + cls_token, non-causal).
void check_attention_call(const AttentionCall& call);
// The call `run_attention` makes for q [B, NH, T, HS] (UsageError unless q is 4-D).
AttentionCall attention_call_for(const at::Tensor& q, bool causal, const std::vector<int64_t>& windows,
                                 double dropout);

// Builds the call from q ([B, NH, T, HS]; q, k, v must agree in shape, dtype, device), checks it,
// selects `kernel` and runs it.
at::Tensor run_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                         const std::vector<int64_t>& windows, double dropout, const std::string& kernel = "auto");

// 2-D attention over a patch grid: q, k, v [B, NH, T, HS] with T = grid_h·grid_w (+1: the class
// token, token 0). windows empty: dense bidirectional attention; otherwise 2-D multi-scale.
at::Tensor run_attention_2d(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::vector<int64_t>& windows, int64_t grid_h, int64_t grid_w, bool cls_token,
                            double dropout, const std::string& kernel = "auto");

}  // namespace xtrain::kernels::attention
