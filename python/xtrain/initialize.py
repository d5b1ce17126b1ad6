"""xtrain.initialize, init_distributed and add_config_arguments: DeepSpeed's entry points."""
import json
import os

import torch

from . import _C
from .engine import EngineOptimizer, EngineScheduler, XtrainEngine, load_config, param_group_specs
from .errors import NotSupported

# torch optimizers xtrain can take over: their class -> the config's optimizer type.
_OPTIMIZERS = {torch.optim.AdamW: "AdamW", torch.optim.Adam: "Adam", torch.optim.SGD: "SGD"}


def init_distributed(dist_backend=None, auto_mpi_discovery=True, distributed_port=None, verbose=True,
                     timeout=None, init_method=None, dist_init_required=None, config=None, rank=-1,
                     world_size=-1):
    """Joins the data-parallel group from the launcher's variables (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT: `xtrain launch`, torchrun, Slurm or Open MPI). Returns (rank, world_size)."""
    if rank >= 0 or world_size >= 0 or init_method is not None:
        raise NotSupported("init_distributed(rank=, world_size=, init_method=) (the launcher's variables are read)")
    seconds = timeout.total_seconds() if timeout is not None else 0.0
    return _C.init_distributed(seconds)


def add_config_arguments(parser):
    """DeepSpeed's --deepspeed and --deepspeed_config (alias --deepscale_config) arguments."""
    group = parser.add_argument_group("xtrain", "xtrain (DeepSpeed-compatible) configuration")
    group.add_argument("--deepspeed", default=False, action="store_true", help="accepted for DeepSpeed scripts")
    group.add_argument("--deepspeed_config", "--deepscale_config", default=None, type=str,
                       help="ds_config.json for xtrain.initialize")
    return parser


def _optimizer_config(optimizer, config):
    """A torch optimizer given to initialize: (the config with its optimizer section, from the
    optimizer's defaults; its param_groups as DeepSpeed parameter groups). The engine runs its own
    fused implementation."""
    kind = _OPTIMIZERS.get(type(optimizer))
    if kind is None or not isinstance(optimizer, torch.optim.Optimizer):
        raise NotSupported(f"initialize(optimizer={type(optimizer).__name__}) (give a torch.optim.AdamW, Adam or "
                           "SGD instance, or an \"optimizer\" section in the config)")
    defaults = optimizer.defaults
    keys = ("lr", "betas", "eps", "weight_decay") if kind != "SGD" else ("lr", "momentum", "weight_decay")
    params = {k: (list(defaults[k]) if k == "betas" else defaults[k]) for k in keys}
    groups = []
    for i, group in enumerate(optimizer.param_groups):
        own = {"params": group["params"]}
        for k, v in group.items():
            if k in ("lr", "weight_decay") and v != defaults[k]:
                own[k] = v
            elif k not in ("params", "lr", "weight_decay") and k in defaults and v != defaults[k]:
                raise NotSupported(f"per-group {k!r} (optimizer.param_groups[{i}] has {k}={v!r}, the optimizer "
                                   f"{defaults[k]!r}; a group may set only lr and weight_decay)")
        groups.append(own)
    config = dict(config or {})
    if "optimizer" in config:
        raise ValueError("xtrain.initialize: an optimizer was given both as an argument and in the config; keep one")
    config["optimizer"] = {"type": kind, "params": params}
    return config, groups


def _as_dict(config):
    if isinstance(config, (str, os.PathLike)):
        with open(config) as f:
            return json.load(f)
    return dict(config)


def _groups_of(model_parameters):
    """model_parameters as a list, and whether it is DeepSpeed/torch parameter groups (dicts)."""
    if model_parameters is None:
        return None, False
    items = [model_parameters] if torch.is_tensor(model_parameters) else list(model_parameters)
    dicts = sum(isinstance(x, dict) for x in items)
    if dicts and dicts != len(items):
        raise ValueError("xtrain.initialize: model_parameters mixes tensors and parameter groups (dicts); "
                         "give all tensors or all dicts, as torch.optim does")
    return items, bool(dicts)


def _resolve(config, model, groups):
    """The resolved config; parameter groups become its xtrain.param_groups (exact names)."""
    resolved = load_config(config)
    if groups is None:
        return resolved
    base_lr = json.loads(resolved.to_json())["optimizer"]["params"]["lr"]
    config = _as_dict(config)
    section = dict(config.get("xtrain", {}))
    if section.get("param_groups"):
        raise ValueError("xtrain.initialize: parameter groups were given both in model_parameters (or the "
                         "optimizer) and in the config's xtrain.param_groups; keep one")
    section["param_groups"] = param_group_specs(model, groups, base_lr)
    config["xtrain"] = section
    return load_config(config)


def _config_source(args, config, config_params):
    config = config if config is not None else config_params
    if config is None and args is not None:
        config = getattr(args, "deepspeed_config", None) or getattr(args, "deepscale_config", None)
    if config is None:
        raise ValueError("xtrain.initialize: no config: pass config= (a path or a dict) or "
                         "args with --deepspeed_config")
    return config


def _loader(training_data, config, collate_fn):
    world, rank = _C.world_size(), 0
    if world > 1:
        rank = _C.init_distributed(0.0)[0]
    sampler = torch.utils.data.distributed.DistributedSampler(training_data, num_replicas=world, rank=rank,
                                                              shuffle=True, seed=config.seed)
    return torch.utils.data.DataLoader(training_data, batch_size=config.train_micro_batch_size_per_gpu,
                                       sampler=sampler, collate_fn=collate_fn, drop_last=True)


def initialize(args=None, model=None, optimizer=None, model_parameters=None, training_data=None,
               lr_scheduler=None, distributed_port=None, mpu=None, dist_init_required=None, collate_fn=None,
               config=None, config_params=None):
    """DeepSpeed's initialize: returns (engine, optimizer, training_dataloader, lr_scheduler).

    config: a ds_config.json path or a dict (or args.deepspeed_config). The optimizer and schedule
    come from the config (or from a torch AdamW/Adam/SGD given as `optimizer`); the loader (None
    without training_data) gives each rank its micro-batches, as DeepSpeed's does.
    """
    if model is None:
        raise ValueError("xtrain.initialize: model is required (a torch.nn.Module)")
    if mpu is not None:
        raise NotSupported("initialize(mpu=...) (tensor/pipeline parallelism from Python)")
    if lr_scheduler is not None:
        raise NotSupported("initialize(lr_scheduler=...) (put the schedule in the config's \"scheduler\" section)")
    config = _config_source(args, config, config_params)
    model_parameters, grouped = _groups_of(model_parameters)
    if optimizer is not None:  # as DeepSpeed: the optimizer's param_groups, not model_parameters
        config, model_parameters = _optimizer_config(optimizer, _as_dict(config))
        grouped = True
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        init_distributed()
    resolved = _resolve(config, model, model_parameters if grouped else None)
    engine = XtrainEngine(model, resolved, model_parameters)
    loader = _loader(training_data, resolved, collate_fn) if training_data is not None else None
    scheduler = EngineScheduler(engine) if _has_scheduler(resolved) else None
    return engine, EngineOptimizer(engine), loader, scheduler


def _has_scheduler(resolved):
    return bool(json.loads(resolved.to_json()).get("scheduler", {}).get("type"))
