// "xtrain": {"python": {...}}: keys only the Python layer (python/xtrain, `import xtrain`) reads;
// the C++ trainer accepts them and does nothing with them.
#pragma once

namespace xtrain::config {

struct PythonOptions {
  bool kernel_inject = true;
  template <class V>
  void visit(V& v) {
    v("kernel_inject", kernel_inject,
      "xtrain: xtrain.initialize runs every CPU torch.nn.Linear (exact type, fp32/bf16) of the module through "
      "xtrain's GEMM kernels (forward and backward); false: PyTorch's own");
  }
};

}  // namespace xtrain::config
