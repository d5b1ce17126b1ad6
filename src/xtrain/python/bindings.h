// The pybind11 module xtrain._C (module.cpp): each part binds its functions into the module.
// Tensors cross as torch.Tensor <-> at::Tensor through torch/csrc/utils/pybind.h's casters (no copy:
// Debian's python3-torch and libtorch-dev are the same libtorch.so).
#pragma once
#include <pybind11/pybind11.h>

namespace xtrain::python {

// xtrain._C.Engine, the config reader and ConfigError, distributed setup, checkpoints (bind_engine.cpp).
void bind_engine(pybind11::module_& m);
// The attention kernels and their registry (bind_ops.cpp).
void bind_ops(pybind11::module_& m);

}  // namespace xtrain::python
