// xtrain._C's attention ops: the kernel registry (kernels/attention/registry.h) as three functions
// behind python/xtrain/ops.py. Design choice: no Python autograd.Function — run_attention returns a
// tensor whose grad_fn is the kernel's C++ autograd node, so backward runs in C++ from Python's
// autograd as from C++'s. Errors: a UsageError or c10::Error (bad shape, unknown kernel) becomes a
// Python ValueError with the same text; the interpreter survives. Reference: PyTorch's C++
// extension tutorial (an op whose backward is a C++ torch::autograd::Function).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/python/bindings.h"

namespace py = pybind11;

namespace xtrain::python {

namespace {

namespace attn = kernels::attention;

// Runs fn; xtrain's and ATen's argument errors leave as ValueError (raised once the GIL is back).
template <class Fn>
auto value_errors(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const UsageError& e) {
    throw py::value_error(e.what());
  } catch (const c10::Error& e) {
    throw py::value_error(e.what_without_backtrace());
  }
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                     const std::vector<int64_t>& windows, double dropout, const std::string& kernel) {
  return value_errors([&] { return attn::run_attention(q, k, v, causal, windows, dropout, kernel); });
}

// The registered kernel `kernel` ("auto" or a name) would run for q, k, v of q's shape.
std::string kernel_for(const at::Tensor& q, bool causal, const std::vector<int64_t>& windows, double dropout,
                       const std::string& kernel) {
  return value_errors([&] {
    return attn::select_attention_kernel(kernel, attn::attention_call_for(q, causal, windows, dropout));
  });
}

}  // namespace

void bind_ops(py::module_& m) {
  m.def("attention", &attention, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("windows"),
        py::arg("dropout"), py::arg("kernel"), py::call_guard<py::gil_scoped_release>(),
        "Attention through xtrain's kernel registry: q, k, v [B, NH, T, HS] -> [B, NH, T, HS], differentiable.");
  m.def("attention_kernel_for", &kernel_for, py::arg("q"), py::arg("causal"), py::arg("windows"), py::arg("dropout"),
        py::arg("kernel"), "The registered kernel a call with q's shape, dtype and device would run.");
  m.def("attention_kernels", &attn::attention_kernel_names, "Registered attention kernels, highest priority first.");
}

}  // namespace xtrain::python
