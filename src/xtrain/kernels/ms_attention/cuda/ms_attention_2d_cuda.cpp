// Binding of the CUDA 2-D multi-scale attention kernels (see ms_attention_2d_cuda.h). Backward
// recomputes the key rows (O(T·HS)) instead of saving them; saved are q, k, v, the output, the lse.
#include "xtrain/kernels/ms_attention/cuda/ms_attention_2d_cuda.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>

#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/dense_reference.h"
#include "xtrain/kernels/ms_attention/cuda/binding.h"
#include "xtrain/kernels/ms_attention/cuda/ms_attention_2d_kernel.cuh"
#include "xtrain/kernels/ms_attention/cuda/ms_attention_cuda.h"
#include "xtrain/kernels/ms_attention/ms_attention_2d_cpu.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::kernels::ms_attention {

namespace {

using binding::dtype_of;
using binding::strides_of;
using binding::unit_last;
constexpr const char* kKernel = "ms2d_fused_cuda";

cuda::Problem2d problem_of(const at::Tensor& q, const std::vector<int64_t>& windows, int64_t gh, int64_t gw, bool cls,
                           double p, uint64_t seed) {
  cuda::Problem2d pr;
  pr.B = q.size(0);
  pr.NH = q.size(1);
  pr.T = q.size(2);
  pr.HS = q.size(3);
  pr.gh = gh;
  pr.gw = gw;
  pr.cls = cls;
  pr.num_windows = static_cast<int>(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) pr.windows[i] = windows[i];
  pr.strip_width = kStripWidth2d;
  pr.dropout = p;
  pr.seed = seed;
  return pr;
}

at::Tensor key_rows(const cuda::Problem2d& pr, const at::Tensor& x) {
  auto out = at::empty({pr.B * pr.NH, cuda::key_rows_2d(pr), pr.HS}, x.options().dtype(at::kFloat));
  C10_CUDA_CHECK(cuda::launch_pool_2d(pr, x.data_ptr(), dtype_of(x.scalar_type(), kKernel), strides_of(x),
                                      out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream()));
  return out;
}

cuda::Problem2d load(torch::autograd::AutogradContext* ctx, const at::Tensor& q) {
  return problem_of(q, ctx->saved_data["windows"].toIntVector(), ctx->saved_data["gh"].toInt(),
                    ctx->saved_data["gw"].toInt(), ctx->saved_data["cls"].toBool(), ctx->saved_data["p"].toDouble(),
                    static_cast<uint64_t>(ctx->saved_data["seed"].toInt()));
}

struct Ms2dCudaFunction : public torch::autograd::Function<Ms2dCudaFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q_in, const at::Tensor& k_in,
                            const at::Tensor& v_in, const std::vector<int64_t>& windows, int64_t gh, int64_t gw,
                            bool cls, double p, int64_t seed) {
    const c10::cuda::CUDAGuard guard(q_in.device());
    const auto q = unit_last(q_in), k = unit_last(k_in), v = unit_last(v_in);
    const auto pr = problem_of(q, windows, gh, gw, cls, p, static_cast<uint64_t>(seed));
    const auto kr = key_rows(pr, k), vr = key_rows(pr, v);
    auto out = at::empty({pr.B, pr.T, pr.NH, pr.HS}, q.options());
    auto lse = at::empty({pr.B * pr.NH, pr.T}, q.options().dtype(at::kFloat));
    C10_CUDA_CHECK(cuda::launch_forward_2d(pr, q.data_ptr(), strides_of(q), dtype_of(q.scalar_type(), kKernel),
                                           kr.data_ptr<float>(), vr.data_ptr<float>(), out.data_ptr(),
                                           lse.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream()));
    ctx->saved_data["windows"] = windows;
    ctx->saved_data["gh"] = gh;
    ctx->saved_data["gw"] = gw;
    ctx->saved_data["cls"] = cls;
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->save_for_backward({q, k, v, out, lse});
    return out.permute({0, 2, 1, 3});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const c10::cuda::CUDAGuard guard(q.device());
    const auto pr = load(ctx, q);
    const auto dout = unit_last(grads[0].to(q.scalar_type()));
    const auto kr = key_rows(pr, k), vr = key_rows(pr, v);
    auto dq = at::empty({pr.B, pr.T, pr.NH, pr.HS}, q.options());
    auto dkr = at::zeros_like(kr), dvr = at::zeros_like(vr);
    C10_CUDA_CHECK(cuda::launch_backward_2d(pr, q.data_ptr(), strides_of(q), dout.data_ptr(), strides_of(dout),
                                            out.data_ptr(), dtype_of(q.scalar_type(), kKernel), kr.data_ptr<float>(),
                                            vr.data_ptr<float>(), lse.data_ptr<float>(), dq.data_ptr(),
                                            dkr.data_ptr<float>(), dvr.data_ptr<float>(),
                                            c10::cuda::getCurrentCUDAStream().stream()));
    const auto heads = [&](const at::Tensor& rows, const at::Tensor& like) {
      return binding::rows_to_heads(rows, like, pr.B, pr.NH, pr.T, pr.HS);
    };
    return {dq.permute({0, 2, 1, 3}), heads(dkr, k), heads(dvr, v), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ms_attention_2d_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const std::vector<int64_t>& windows, int64_t gh, int64_t gw, bool cls_token,
                                double dropout_p, std::optional<uint64_t> seed) {
  binding::check_inputs(q, k, v, windows, kKernel);
  check_grid_call(q, gh, gw, cls_token, dropout_p);
  const uint64_t s = dropout_p > 0 ? (seed ? *seed : attention::draw_dropout_seed()) : 0;
  return Ms2dCudaFunction::apply(q, k, v, windows, gh, gw, cls_token, dropout_p, static_cast<int64_t>(s));
}

}  // namespace xtrain::kernels::ms_attention
