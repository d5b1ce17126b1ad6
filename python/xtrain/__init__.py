"""xtrain from Python: DeepSpeed's training API over xtrain's C++ engine.

    import xtrain            # or: import xtrain as deepspeed
    engine, optimizer, loader, scheduler = xtrain.initialize(model=model, config="ds.json")
"""
import torch  # noqa: F401  (loads libtorch before the extension, which links it)

from . import _C  # noqa: F401
