"""Kernel injection for training (DeepSpeed's replace_with_kernel_inject, here on by default): the
engine runs the heavy parts of a Python module's forward and backward in xtrain's C++ kernels.

Modules: every torch.nn.Linear whose weight is on the CPU in fp32 or bf16 runs xtrain.ops.linear (the
routed GEMM of src/xtrain/kernels/linear.h: oneDNN or ATen per dtype, chosen by measurement) instead
of PyTorch's linear (OpenBLAS for fp32). Only the exact type torch.nn.Linear: a subclass may have its
own forward or meaning (quantised, LoRA, ...) and is left as is, and so is a Linear on another device
or dtype. The patch is per instance: `linear.forward` becomes a bound method calling
xtrain.ops.linear with the module's own weight and bias at call time, so parameters, state_dict,
hooks (ZeRO-3's unit forward wraps this one) and the module tree stay the same; `remove` undoes it.

Functions, while the engine runs the module's forward (`functions()`, a TorchFunctionMode): a matmul
whose right operand is a 2-D parameter or its transpose (a tied LM head, `h @ wte.weight.t()`) runs
xtrain.ops.linear; a matmul or bmm of two 3-D to 6-D activations with equal batch dims (attention
written inline: `q @ k.transpose(-2, -1)`, `att @ v`) runs xtrain.ops.matmul; and
torch.nn.functional.gelu(x, approximate="tanh") runs xtrain.ops.gelu_tanh; all for CPU fp32/bf16
tensors outside autocast. Every other call runs PyTorch's own.

The config key xtrain.python.kernel_inject: false turns both off.
"""
import types

import torch
from torch.overrides import TorchFunctionMode

from . import ops

__all__ = ["inject_kernels", "is_injected", "remove", "functions"]

_DTYPES = (torch.float32, torch.bfloat16)


def _linear_forward(self, input):  # noqa: A002 (torch.nn.Linear.forward's argument name)
    return ops.linear(input, self.weight, self.bias)


def _injectable(module):
    if type(module) is not torch.nn.Linear or is_injected(module):
        return False
    w, b = module.weight, module.bias
    if w.device.type != "cpu" or w.dtype not in _DTYPES:
        return False
    return b is None or (b.device.type == "cpu" and b.dtype == w.dtype)


def is_injected(module):
    """Whether `module` runs xtrain's linear kernel (inject_kernels patched it)."""
    forward = module.__dict__.get("forward")
    return isinstance(forward, types.MethodType) and forward.__func__ is _linear_forward


def inject_kernels(model):
    """Patches every injectable torch.nn.Linear in `model` (itself included); returns their names."""
    names = []
    for name, module in model.named_modules():
        if _injectable(module):
            module.forward = types.MethodType(_linear_forward, module)
            names.append(name)
    return names


def remove(model):
    """Undoes inject_kernels: the patched Linears run torch.nn.Linear.forward again."""
    for module in model.modules():
        if is_injected(module):
            del module.forward


def _served(*tensors):
    t0 = tensors[0]
    return all(isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dtype == t0.dtype for t in tensors) and \
        t0.dtype in _DTYPES and not torch.is_autocast_cpu_enabled()


def _is_weight(t):
    """A 2-D parameter, or a view of one (w.t(), w.T)."""
    return t.dim() == 2 and (isinstance(t, torch.nn.Parameter) or isinstance(t._base, torch.nn.Parameter))


_MATMULS = frozenset([torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__])
_BMMS = frozenset([torch.bmm, torch.Tensor.bmm])


def _batched_pair(a, b):
    """Two activations [..., M, K] and [..., K, N], 3-D to 6-D, with equal batch dims."""
    return 3 <= a.dim() <= 6 and a.dim() == b.dim() and a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-2]
_GELU = torch.nn.functional.gelu


class _Functions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _MATMULS and len(args) == 2 and not kwargs:
            x, w = args
            if _served(x, w) and x.dim() >= 2 and _is_weight(w):
                return ops.linear(x, w.t())  # x @ w == x @ (wᵀ)ᵀ; strides carry the transposes
            if _served(x, w) and _batched_pair(x, w):
                return ops.matmul(x, w)
        elif func in _BMMS and len(args) == 2 and not kwargs:
            if _served(*args) and args[0].dim() == 3 and _batched_pair(*args):
                return ops.matmul(*args)
        elif func is _GELU and args and _served(args[0]):
            approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
            if approximate == "tanh" and len(args) + len(kwargs) <= 2:
                return ops.gelu_tanh(args[0])
        return func(*args, **kwargs)


def functions():
    """A context manager: inside it, the function calls described above run xtrain's kernels."""
    return _Functions()
