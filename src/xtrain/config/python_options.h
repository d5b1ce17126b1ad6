// "xtrain": {"python": {...}}: keys only the Python layer (python/xtrain, `import xtrain`) reads;
// the C++ trainer accepts them and does nothing with them.
#pragma once

namespace xtrain::config {

struct PythonOptions {
  bool kernel_inject = true;
  bool memory_pool = true;
  template <class V>
  void visit(V& v) {
    v("memory_pool", memory_pool,
      "xtrain: xtrain.initialize installs xtrain's caching CPU allocator for the process (the one `xtrain` runs "
      "with): a step's freed temporaries are reused instead of page-faulted anew; false: LibTorch's allocator");
    v("kernel_inject", kernel_inject,
      "xtrain: xtrain.initialize runs the module's CPU fp32/bf16 torch.nn.Linear layers (exact type), matmuls "
      "with a weight (a tied LM head), batched matmuls of two activations (inline attention) and tanh GELUs in "
      "xtrain's kernels, forward and backward; false: PyTorch's own");
  }
};

}  // namespace xtrain::config
