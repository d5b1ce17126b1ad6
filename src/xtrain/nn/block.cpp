// Block: two residual branches, each behind its LayerNorm.
#include "xtrain/nn/block.h"

namespace xtrain::nn {

BlockImpl::BlockImpl(int64_t C, int64_t NH, int64_t max_T, double dropout) {
  ln1 = register_module("ln1", LayerNorm(C));
  attn = register_module("attn", CausalSelfAttention(C, NH, max_T, dropout));
  ln2 = register_module("ln2", LayerNorm(C));
  mlp = register_module("mlp", Mlp(C, dropout));
}

at::Tensor BlockImpl::forward(const at::Tensor& x) {
  auto h = x + attn->forward(ln1->forward(x));
  return h + mlp->forward(ln2->forward(h));
}

}  // namespace xtrain::nn
