// ParallelBlock and ParallelMlp: nn::Block's residual structure over the tensor-parallel layers.
#include "xtrain/parallel/tensor/parallel_block.h"

#include "xtrain/kernels/activation.h"

namespace xtrain::parallel::tensor {

ParallelMlpImpl::ParallelMlpImpl(int64_t C, CommPtr tp) {
  fc = register_module("fc", ColumnParallelLinear(C, 4 * C, tp));
  proj = register_module("proj", RowParallelLinear(4 * C, C, tp, true, /*input_is_parallel=*/true));
}

at::Tensor ParallelMlpImpl::forward(const at::Tensor& x) { return proj->forward(kernels::gelu_tanh(fc->forward(x))); }

ParallelBlockImpl::ParallelBlockImpl(int64_t C, int64_t NH, int64_t max_T, CommPtr tp, double dropout) {
  ln1 = register_module("ln1", nn::LayerNorm(C));
  attn = register_module("attn", ParallelSelfAttention(C, NH, max_T, tp, dropout));
  ln2 = register_module("ln2", nn::LayerNorm(C));
  mlp = register_module("mlp", ParallelMlp(C, tp));
}

at::Tensor ParallelBlockImpl::forward(const at::Tensor& x) {
  const at::Tensor h = x + attn->forward(ln1->forward(x));
  return h + mlp->forward(ln2->forward(h));
}

}  // namespace xtrain::parallel::tensor
