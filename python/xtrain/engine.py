"""DeepSpeed's engine API over xtrain's C++ Engine (src/xtrain/engine/engine.h).

The module's forward runs in Python; `backward` and `step` run in C++: the engine holds the module's
own parameter tensors (their storage and gradients live in its flat buffers), scales the loss by the
accumulation steps, reduces gradients over the data-parallel ranks, clips, and steps the optimizer
and schedule from the config at each accumulation boundary. The module's CPU torch.nn.Linear layers,
matmuls with a weight or of two activations and tanh GELUs run xtrain's kernels (inject.py) unless
xtrain.python.kernel_inject is false, and the process allocates CPU tensors from xtrain's caching
pool (src/xtrain/base/memory_pool.h) unless xtrain.python.memory_pool is false.
"""
import collections
import io
import json
import os
import time

import torch

from . import _C
from .errors import NotSupported
from .inject import functions, inject_kernels


def _config_text(config):
    """(source, is_text) for _C.load_config: a dict becomes JSON text, a path stays a path."""
    if config is None:
        return "{}", True
    if isinstance(config, dict):
        return json.dumps(config), True
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config), False
    raise TypeError(f"xtrain.initialize: config must be a path or a dict, got {type(config).__name__}")


def load_config(config):
    """The resolved config (an _C.Config); bad keys raise xtrain.ConfigError with a suggestion."""
    source, is_text = _config_text(config)
    return _C.load_config(source, is_text)


def _trainable(model, model_parameters):
    """The named parameters to train: all of the model's that require grad, or those given."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if model_parameters is None:
        return named
    chosen = set()
    for item in model_parameters:
        if isinstance(item, dict):  # a parameter group: its tensors (its options: param_group_specs)
            chosen.update(id(p) for p in _group_tensors(item))
        else:
            chosen.add(id(item))
    picked = [(n, p) for n, p in named if id(p) in chosen]
    if len(picked) != len(chosen):
        raise ValueError("xtrain.initialize: model_parameters holds tensors that are not parameters of model "
                         "(or do not require grad); pass model.parameters() or a subset of them")
    return picked


# What a parameter group (a dict in model_parameters, or a torch optimizer's param_groups) may set.
_GROUP_KEYS = ("params", "lr", "weight_decay")


def _group_tensors(group):
    params = group["params"]
    return [params] if torch.is_tensor(params) else list(params)


def _escape_glob(name):
    """A parameter name as an xtrain.param_groups glob that matches only it (fnmatch escapes)."""
    return "".join("\\" + c if c in "*?[\\" else c for c in name)


def param_group_specs(model, groups, base_lr):
    """DeepSpeed's parameter groups (dicts of params and, optionally, lr and weight_decay) as
    xtrain.param_groups entries: the exact names of the group's tensors, its weight_decay, and
    lr_scale = its lr / the optimizer's lr. Another per-group key raises NotSupported."""
    names = {id(p): n for n, p in model.named_parameters()}
    specs = []
    for i, group in enumerate(groups):
        extra = sorted(k for k in group if k not in _GROUP_KEYS)
        if extra:
            raise NotSupported(f"per-group {', '.join(map(repr, extra))} in model_parameters[{i}] (a group may "
                               "set only params, lr and weight_decay; the rest come from the config's optimizer)")
        tensors = [names[id(p)] for p in _group_tensors(group) if id(p) in names]
        if not tensors:
            continue  # an empty group (or one of tensors _trainable rejects) trains nothing
        spec = {"params": [_escape_glob(n) for n in tensors]}
        if "weight_decay" in group:
            spec["weight_decay"] = float(group["weight_decay"])
        if "lr" in group:
            if base_lr <= 0:
                raise ValueError(f"xtrain.initialize: model_parameters[{i}] sets lr but the optimizer's lr is "
                                 f"{base_lr}; give optimizer.params.lr > 0 in the config")
            spec["lr_scale"] = float(group["lr"]) / base_lr
        specs.append(spec)
    return specs


def _cast_inputs(value, dtype):
    if torch.is_tensor(value):
        return value.to(dtype) if value.is_floating_point() and value.dtype != dtype else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_inputs(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_inputs(v, dtype) for k, v in value.items()}
    return value


class EngineOptimizer:
    """What xtrain.initialize returns as the optimizer: the engine steps it (engine.step())."""

    def __init__(self, engine):
        self._engine = engine

    @property
    def param_groups(self):
        return [{"lr": self._engine.get_lr()[0], "params": list(self._engine.module.parameters())}]

    def zero_grad(self, set_to_none=False):
        """Nothing to do: the engine zeroes the gradients after each optimizer step."""

    def step(self, closure=None):
        raise NotSupported("optimizer.step() (call engine.step() after engine.backward(loss): "
                           "the engine steps at the accumulation boundary)")

    def state_dict(self):
        raise NotSupported("optimizer.state_dict() (engine.save_checkpoint() saves the optimizer state)")


class EngineScheduler:
    """The config's scheduler as DeepSpeed returns it: the engine steps it with the optimizer."""

    def __init__(self, engine):
        self._engine = engine

    def get_lr(self):
        return self._engine.get_lr()

    get_last_lr = get_lr

    def step(self, *args, **kwargs):
        """Nothing to do: the engine advances the schedule at each optimizer step."""


class XtrainEngine(torch.nn.Module):
    """DeepSpeedEngine's training API: engine(batch), engine.backward(loss), engine.step()."""

    def __init__(self, model, config, model_parameters=None):
        super().__init__()
        self.module = model
        self._config = config
        sequences = set()
        if config.zero_stage == 3:
            from .zero3 import sequence_paths
            sequences = sequence_paths(model)
        # DeepSpeed's optimizer takes model_parameters as torch.optim does: a tensor in no group with
        # its own weight_decay decays, biases and norms included (not xtrain's nanoGPT split).
        config.no_decay_for_bias_and_norm = False
        if config.memory_pool:  # xtrain's caching CPU allocator, as the xtrain program runs with
            _C.install_memory_pool(True)
        self._c = _C.Engine(_trainable(model, model_parameters), config, sequences)
        self._dtype = {"BFloat16": torch.bfloat16, "Half": torch.float16}.get(self._c.param_dtype, torch.float32)
        if self._dtype != torch.float32:
            with torch.no_grad():  # floating buffers (BatchNorm statistics) follow the parameters
                for b in model.buffers():
                    if b.is_floating_point():
                        b.data = b.data.to(self._dtype)
        # After the dtype change (bf16 parameters qualify too), before ZeRO-3 wraps unit forwards.
        self._injected = config.kernel_inject
        if self._injected:
            inject_kernels(model)
        if config.zero_stage == 3:
            from .zero3 import attach_stage3
            attach_stage3(self)
        self._metrics_open, self._step_start = False, None
        if self._c.monitor_enabled:  # DeepSpeed's tensorboard / csv_monitor: <output_path>/<job_name>
            self.monitor(self._c.monitor_dir or "runs/python")

    # ---- the training step -------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        if self._dtype != torch.float32:  # inputs follow the parameters (fp16.auto_cast semantics)
            args, kwargs = _cast_inputs(args, self._dtype), _cast_inputs(kwargs, self._dtype)
        if not self._injected:
            return self.module(*args, **kwargs)
        with functions():  # a tied head's matmul and tanh GELU in xtrain's kernels (inject.py)
            return self.module(*args, **kwargs)

    def backward(self, loss, retain_graph=False, scale_wrt_gas=True):
        if retain_graph or not scale_wrt_gas:
            raise NotSupported("engine.backward(retain_graph=True / scale_wrt_gas=False)")
        self._c.backward(loss)
        return loss

    def step(self, lr_kwargs=None):
        stepped = self._c.step()
        if stepped and self._metrics_open:
            now = time.perf_counter()
            rate = self.train_batch_size() / (now - self._step_start) if self._step_start else 0.0
            self._c.write_metrics(rate)
            self._step_start = now
        return stepped

    def monitor(self, run_dir):
        """Writes each optimizer step's metrics (train/loss, lr, grad_norm, ...) to
        <run_dir>/metrics.jsonl, and to TensorBoard / CSV when the config enables them, as `xtrain
        train` does (so `xtrain dashboard` shows the run). Rank 0 writes; every rank may call it."""
        os.makedirs(run_dir, exist_ok=True)
        self._c.open_metrics(os.fspath(run_dir))
        self._metrics_open, self._step_start = True, time.perf_counter()

    def is_gradient_accumulation_boundary(self):
        return self._c.is_gradient_accumulation_boundary()

    # ---- what DeepSpeed's engine reports -----------------------------------------------------
    @property
    def global_steps(self):
        return self._c.global_steps

    @property
    def global_samples(self):
        return self._c.global_samples

    @property
    def micro_steps(self):
        return self._c.micro_steps

    @property
    def skipped_steps(self):
        return self._c.skipped_steps

    @property
    def loss_scale(self):
        return self._c.loss_scale

    def get_lr(self):
        return [self._c.lr]

    def get_global_grad_norm(self):
        return self._c.last_step["grad_norm"]

    def last_step(self):
        """The last optimizer step: step, loss (mean over micro-batches and ranks), grad_norm, lr, skipped."""
        return self._c.last_step

    def train_batch_size(self):
        return self._config.train_batch_size

    def train_micro_batch_size_per_gpu(self):
        return self._config.train_micro_batch_size_per_gpu

    def gradient_accumulation_steps(self):
        return self._config.gradient_accumulation_steps

    def zero_optimization_stage(self):
        return self._config.zero_stage

    def bfloat16_enabled(self):
        return self._config.bf16

    def fp16_enabled(self):
        return self._config.fp16

    @property
    def local_rank(self):
        return int(os.environ.get("LOCAL_RANK", "0"))

    @property
    def global_rank(self):
        return self._c.dp_rank

    @property
    def world_size(self):
        return self._c.dp_world_size

    def full_parameters(self):
        """Every trainable parameter whole (copies, by name); collective under ZeRO stage 3."""
        return collections.OrderedDict(self._c.full_parameters())

    # ---- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, save_dir, tag=None, client_state=None, save_latest=True, exclude_frozen_parameters=False):
        """Writes <save_dir>/checkpoints/<tag> (default global_step<N>), the layout `xtrain train`
        writes, and points <save_dir>/checkpoints/latest at it. Every rank calls it."""
        if not save_latest:
            raise NotSupported("save_checkpoint(save_latest=False)")
        buf = io.BytesIO()
        torch.save(dict(client_state or {}), buf)
        buffers = [(n, b.detach().clone()) for n, b in self.module.named_buffers()]
        self._c.save(os.fspath(save_dir), tag or "", buffers, buf.getvalue())
        return True

    def load_checkpoint(self, load_dir, tag=None, load_module_strict=True, load_optimizer_states=True,
                        load_lr_scheduler_states=True, load_module_only=False):
        """Restores <load_dir>/checkpoints/<tag or latest>; returns (path, client_state) as DeepSpeed."""
        if not load_lr_scheduler_states and load_optimizer_states:
            raise NotSupported("load_checkpoint(load_lr_scheduler_states=False)")
        path, client, buffers = self._c.load(os.fspath(load_dir), tag or "",
                                             bool(load_optimizer_states and not load_module_only))
        own = dict(self.module.named_buffers())
        with torch.no_grad():
            for name, value in buffers:
                if name in own:
                    own[name].copy_(value)
                elif load_module_strict:
                    raise ValueError(f"load_checkpoint: the checkpoint has buffer {name!r}, the module has not")
        state = torch.load(io.BytesIO(client)) if client else {}
        return path, state

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_"):
                raise
            raise NotSupported(f"DeepSpeedEngine.{name}") from None
