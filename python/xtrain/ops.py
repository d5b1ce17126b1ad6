"""xtrain.ops: xtrain's C++ kernels as functions on torch tensors.

`attention` calls the attention kernel registry (src/xtrain/kernels/attention/registry.h): "auto"
picks the highest-priority registered kernel that supports the call (the fused multi-scale CPU
kernel for windowed attention on the CPU, for example); a name picks that kernel. Forward and
backward both run in C++: the returned tensor's grad_fn is the kernel's C++ autograd node.

`linear` is xtrain's routed GEMM (src/xtrain/kernels/linear.h), the kernel every Linear of xtrain's
C++ models runs, `matmul` the same GEMM for two activations (kernels/matmul.h) and `gelu_tanh` its
fused GELU (kernels/activation.h); xtrain.initialize injects all three into a Python module's forward
(xtrain/inject.py).
"""
from . import _C

__all__ = ["attention", "kernels", "kernel_for", "linear", "matmul", "gelu_tanh"]


def _windows(windows):
    if windows is None:
        return []
    if isinstance(windows, int):
        return [windows]
    return [int(w) for w in windows]


def attention(q, k, v, kernel="auto", windows=None, causal=True, dropout=0.0):
    """Multi-head attention over q, k, v of shape [B, NH, T, HS] (any strides, one dtype and device).

    windows: None or [] for dense attention (every causally allowed position); an int or a list for
    multi-scale attention (shared/design/multiscale-attention.md: the NH heads split over the windows
    as numpy.array_split does, each query sees the exact multi-scale partition). dropout: on the
    attention weights (pass 0 outside training; the mask is drawn from torch's CPU generator).
    Returns [B, NH, T, HS]. ValueError names the bad shape, dtype, window or kernel.
    """
    return _C.attention(q, k, v, bool(causal), _windows(windows), float(dropout), str(kernel))


def kernel_for(q, kernel="auto", windows=None, causal=True, dropout=0.0):
    """The name of the registered kernel `attention` would run for q, k, v shaped like q."""
    return _C.attention_kernel_for(q, bool(causal), _windows(windows), float(dropout), str(kernel))


def kernels():
    """The registered attention kernels, highest priority first ("auto" picks among them)."""
    return list(_C.attention_kernels())


def linear(x, weight, bias=None):
    """torch.nn.functional.linear(x, weight, bias) through xtrain's GEMM: x [..., in], weight [out, in],
    bias [out] or None -> [..., out]. On the CPU in fp32 or bf16 forward and backward (dX = dY W,
    dW = dYᵀ X, db = Σ dY) run oneDNN or ATen, whichever xtrain measured faster for the dtype, in one
    C++ autograd node; other dtypes and devices run at::linear. ValueError names bad shapes or dtypes.
    """
    return _C.linear(x, weight, bias)


def matmul(a, b):
    """a @ b for two activations: [..., M, K] @ [..., K, N] with equal leading (batch) dims, 3-D to 6-D,
    on the CPU in fp32 or bf16, runs xtrain's routed GEMM forward and backward (dA = dC Bᵀ, dB = Aᵀ dC,
    transposes through strides) in one C++ autograd node; anything else (broadcasting, 2-D, autocast,
    other dtypes or devices) is torch.matmul. ValueError names bad shapes."""
    return _C.matmul(a, b)


def gelu_tanh(x):
    """torch.nn.functional.gelu(x, approximate="tanh") in one fused pass forward and one backward
    (fp32 or bf16 on a CPU with AVX-512; anything else runs ATen's gelu). Differentiable in C++."""
    return _C.gelu_tanh(x)
