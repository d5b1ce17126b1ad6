// PyInit__C: the extension module `xtrain._C` that python/xtrain/ wraps.
#include <torch/csrc/utils/pybind.h>

#include "xtrain/python/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "xtrain's C++ core (the engine, the config reader, the attention kernels)";
  xtrain::python::bind_engine(m);
  xtrain::python::bind_ops(m);
}
