// Conjugate pairs as custom autograd functions. Collectives work in place, so forward/backward
// reduce into a fresh contiguous copy; all_gather collects [tp, ...] and is laid out along the last
// dimension with one cat.
#include "xtrain/parallel/tensor/mappings.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/custom_function.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::parallel::tensor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool trivial(const CommPtr& tp) { return !tp || tp->size() == 1; }

at::Tensor all_reduced(const at::Tensor& x, comm::Communicator& tp) {
  at::Tensor out = x.contiguous().clone();
  tp.all_reduce(out, comm::ReduceOp::kSum);
  return out;
}

at::Tensor slice_of(const at::Tensor& x, comm::Communicator& tp) {
  const int64_t N = x.size(-1);
  XTRAIN_USAGE_CHECK(N % tp.size() == 0, "parallel: tensor_parallel.size (", tp.size(),
                     ") must divide the split dimension, got ", N, " (shape ", x.sizes(), ")");
  const int64_t n = N / tp.size();
  return x.narrow(-1, tp.rank() * n, n).contiguous();
}

at::Tensor all_gathered(const at::Tensor& x, comm::Communicator& tp) {
  const at::Tensor in = x.contiguous();
  std::vector<int64_t> shape{tp.size()};
  for (int64_t d : in.sizes()) shape.push_back(d);
  at::Tensor out = at::empty(shape, in.options());
  tp.all_gather(in, out);
  return at::cat(out.unbind(0), -1);
}

// The group travels in a capsule in ctx->saved_data and is kept alive by it.
struct Group : torch::CustomClassHolder {
  explicit Group(CommPtr c) : comm(std::move(c)) {}
  CommPtr comm;
};

void keep(AutogradContext* ctx, const CommPtr& tp) {
  ctx->saved_data["tp"] = c10::IValue::make_capsule(c10::make_intrusive<Group>(tp));
}

comm::Communicator& group(AutogradContext* ctx) {
  auto holder = ctx->saved_data["tp"].toCapsule();
  return *static_cast<Group*>(holder.get())->comm;
}

struct Copy : torch::autograd::Function<Copy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const CommPtr& tp) {
    keep(ctx, tp);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) { return {all_reduced(g[0], group(ctx)), {}}; }
};

struct Reduce : torch::autograd::Function<Reduce> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, const CommPtr& tp) { return all_reduced(x, *tp); }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], {}}; }
};

struct Scatter : torch::autograd::Function<Scatter> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const CommPtr& tp) {
    keep(ctx, tp);
    return slice_of(x, *tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) { return {all_gathered(g[0], group(ctx)), {}}; }
};

struct Gather : torch::autograd::Function<Gather> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const CommPtr& tp) {
    keep(ctx, tp);
    return all_gathered(x, *tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) { return {slice_of(g[0], group(ctx)), {}}; }
};

}  // namespace

at::Tensor copy_to_tensor_parallel(const at::Tensor& x, const CommPtr& tp) {
  return trivial(tp) ? x : Copy::apply(x, tp);
}

at::Tensor reduce_from_tensor_parallel(const at::Tensor& x, const CommPtr& tp) {
  return trivial(tp) ? x : Reduce::apply(x, tp);
}

at::Tensor scatter_to_tensor_parallel(const at::Tensor& x, const CommPtr& tp) {
  return trivial(tp) ? x : Scatter::apply(x, tp);
}

at::Tensor gather_from_tensor_parallel(const at::Tensor& x, const CommPtr& tp) {
  return trivial(tp) ? x : Gather::apply(x, tp);
}

}  // namespace xtrain::parallel::tensor
