// xtrain._C's engine part (filled in below).
#include <torch/csrc/utils/pybind.h>

#include "xtrain/python/bindings.h"

namespace xtrain::python {

void bind_engine(pybind11::module_& m) {}

}  // namespace xtrain::python
