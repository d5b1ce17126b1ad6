"""Kernel injection for training (DeepSpeed's replace_with_kernel_inject, here on by default): every
torch.nn.Linear of a module whose weight is on the CPU in fp32 or bf16 runs forward and backward
through xtrain.ops.linear (the routed GEMM of src/xtrain/kernels/linear.h: oneDNN or ATen per dtype,
chosen by measurement) instead of PyTorch's linear (OpenBLAS for fp32 on this kind of machine).

Only the exact type torch.nn.Linear is injected: a subclass may have its own forward or meaning
(quantised, LoRA, ...) and is left as is, and so is a Linear on another device or dtype. The patch is
per instance: `linear.forward` becomes a bound method calling xtrain.ops.linear with the module's
own weight and bias at call time, so parameters, state_dict, hooks (ZeRO-3's unit forward wraps
this one) and the module tree stay the same. `remove` restores PyTorch's forward. The config key
xtrain.python.kernel_inject: false turns injection off.
"""
import types

import torch

from . import ops

__all__ = ["inject_kernels", "is_injected", "remove"]

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
