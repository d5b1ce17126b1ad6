// Block: two residual branches, each behind its LayerNorm. The residual adds go in place into the
// branch outputs (fresh tensors whose backward does not need their values), saving one [B, T, C]
// temporary per add; x + y and y + x round identically.
#include "xtrain/nn/block.h"

#include "xtrain/nn/attention_factory.h"

namespace xtrain::nn {

BlockImpl::BlockImpl(int64_t C, int64_t NH, int64_t max_T, double dropout,
                     const AttentionOptions& attention) {
  ln1 = register_module("ln1", LayerNorm(C));
  attn = make_attention(C, NH, max_T, dropout, attention);
  register_module("attn", attn.ptr());
  ln2 = register_module("ln2", LayerNorm(C));
  mlp = register_module("mlp", Mlp(C, dropout));
}

at::Tensor BlockImpl::forward(const at::Tensor& x) {
  auto h = attn.forward(ln1->forward(x)).add_(x);
  return mlp->forward(ln2->forward(h)).add_(h);
}

}  // namespace xtrain::nn
