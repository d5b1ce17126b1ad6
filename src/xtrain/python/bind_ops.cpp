// xtrain._C's ops behind python/xtrain/ops.py: the attention kernel registry
// (kernels/attention/registry.h) as three functions, kernels::linear (the routed GEMM every Linear
// of xtrain's C++ models runs) and kernels::gelu_tanh, which xtrain.initialize injects into a
// Python module's forward (python/xtrain/inject.py).
// Design choice: no Python autograd.Function — run_attention and linear return a tensor whose
// grad_fn is the kernel's C++ autograd node, so backward runs in C++ from Python's
// autograd as from C++'s. Errors: a UsageError or c10::Error (bad shape, unknown kernel) becomes a
// Python ValueError with the same text; the interpreter survives. Reference: PyTorch's C++
// extension tutorial (an op whose backward is a C++ torch::autograd::Function).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/autocast_mode.h>

#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/linear.h"
#include "xtrain/kernels/matmul.h"
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

// y = x·weightᵀ + bias through kernels::linear. The checks torch.nn.functional.linear makes, as
// ValueErrors naming the shapes; a dtype or device the routed GEMM lacks runs at::linear there.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias_in) {
  const at::Tensor bias = bias_in.value_or(at::Tensor());
  return value_errors([&] {
    XTRAIN_USAGE_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1),
                       "xtrain.ops.linear: input [..., in] and weight [out, in] must agree, got input ",
                       x.sizes(), " and weight ", weight.sizes());
    XTRAIN_USAGE_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)),
                       "xtrain.ops.linear: bias must be [out] = [", weight.size(0), "], got ", bias.sizes());
    // Under CPU autocast kernels::linear casts all three to the autocast dtype, as at::linear does.
    const auto t = x.scalar_type();
    const bool one_dtype = weight.scalar_type() == t && (!bias.defined() || bias.scalar_type() == t);
    const std::string bias_dtype = bias.defined() ? std::string(", bias ") + c10::toString(bias.scalar_type()) : "";
    XTRAIN_USAGE_CHECK(one_dtype || at::autocast::is_cpu_enabled(),
                       "xtrain.ops.linear: input, weight and bias must have one dtype, got input ", t, ", weight ",
                       weight.scalar_type(), bias_dtype);
    XTRAIN_USAGE_CHECK(x.device() == weight.device() && (!bias.defined() || bias.device() == x.device()),
                       "xtrain.ops.linear: input, weight and bias must be on one device");
    return kernels::linear(x, weight, bias);
  });
}

// a @ b for two activations through kernels::matmul; torch.matmul's own errors for shapes it refuses.
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  return value_errors([&] {
    XTRAIN_USAGE_CHECK(a.dim() >= 1 && b.dim() >= 1, "xtrain.ops.matmul: both operands need a dimension, got ",
                       a.sizes(), " and ", b.sizes());
    return kernels::matmul(a, b);
  });
}

}  // namespace

void bind_ops(py::module_& m) {
  m.def("attention", &attention, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("windows"),
        py::arg("dropout"), py::arg("kernel"), py::call_guard<py::gil_scoped_release>(),
        "Attention through xtrain's kernel registry: q, k, v [B, NH, T, HS] -> [B, NH, T, HS], differentiable.");
  m.def("linear", &linear, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(),
        py::call_guard<py::gil_scoped_release>(),
        "y = x @ weight.T + bias through xtrain's routed GEMM (kernels/linear.h), differentiable in C++.");
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"), py::call_guard<py::gil_scoped_release>(),
        "a @ b; for CPU fp32/bf16 [..., M, K] @ [..., K, N] with equal batch dims through xtrain's routed GEMM "
        "(kernels/matmul.h), differentiable in C++; otherwise torch.matmul.");
  m.def("gelu_tanh", [](const at::Tensor& x) { return value_errors([&] { return kernels::gelu_tanh(x); }); },
        py::arg("x"), py::call_guard<py::gil_scoped_release>(),
        "GELU, tanh approximation, through xtrain's fused kernel (kernels/activation.h), differentiable in C++.");
  m.def("attention_kernel_for", &kernel_for, py::arg("q"), py::arg("causal"), py::arg("windows"), py::arg("dropout"),
        py::arg("kernel"), "The registered kernel a call with q's shape, dtype and device would run.");
  m.def("attention_kernels", &attn::attention_kernel_names, "Registered attention kernels, highest priority first.");
}

}  // namespace xtrain::python
