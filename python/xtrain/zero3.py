"""ZeRO stage 3 for Python modules: the children of every nn.Sequential and nn.ModuleList whose
parameters are larger than stage3_param_persistence_threshold are units. A unit's forward runs
through the C++ strategy (Stage3Strategy::run_unit): its parameters are gathered before and released
after; in backward, autograd nodes on the unit's input and output gather them again and reduce-scatter
their gradients. Parameters outside units stay whole on every rank. A unit must be called with one
tensor and use its parameters only inside its forward (as the C++ side requires of Sequential
children)."""
import torch

from .errors import NotSupported


def sequence_paths(model):
    """Module paths ("" is the model) of its nn.Sequential and nn.ModuleList: their children are units."""
    return {name for name, m in model.named_modules() if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList))}


def _unit_forward(c_engine, unit, path, inner):
    def forward(x, *args, **kwargs):
        if args or kwargs or not torch.is_tensor(x):
            raise NotSupported(f"a ZeRO-3 unit ({path}) called with more than one tensor")
        return c_engine.run_unit(unit, inner, x)
    return forward


def attach_stage3(engine):
    """Routes every unit's forward through the strategy (an instance attribute over the class's forward)."""
    for path, unit in engine._c.units:
        sub = engine.module.get_submodule(path)
        sub.forward = _unit_forward(engine._c, unit, path, sub.forward)
