"""xtrain from Python: DeepSpeed's training API over xtrain's C++ engine.

    import xtrain            # or: import xtrain as deepspeed
    engine, optimizer, loader, scheduler = xtrain.initialize(model=model, config="ds.json")
    for x, y in loader:
        loss = engine(x, y); engine.backward(loss); engine.step()

xtrain.nn and xtrain.ops hold the C++ kernels as torch modules and functions.
"""
import collections
import os

import torch  # noqa: F401  (loads libtorch before the extension, which links it)

from . import _C
from .errors import ConfigError, NotSupported
from .engine import EngineOptimizer, EngineScheduler, XtrainEngine, load_config
from .initialize import add_config_arguments, initialize, init_distributed

__all__ = ["initialize", "init_distributed", "add_config_arguments", "load_state_dict", "ConfigError",
           "NotSupported", "XtrainEngine", "EngineOptimizer", "EngineScheduler", "load_config"]
__version__ = "0.1.0"


def load_state_dict(run_dir, tag=None):
    """The parameters and buffers of a checkpoint as a plain state_dict (whole fp32 tensors, ZeRO
    shards consolidated), for model.load_state_dict(). run_dir: what save_checkpoint (or `xtrain
    train --output`) was given; tag: default the latest."""
    return collections.OrderedDict(_C.read_state(os.fspath(run_dir), tag or ""))


def __getattr__(name):  # deepspeed.<something we lack>
    if name.startswith("_"):
        raise AttributeError(name)
    raise NotSupported(f"deepspeed.{name}")
