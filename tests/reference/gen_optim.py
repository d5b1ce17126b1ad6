#!/usr/bin/python3
"""Reference trajectories for tests/optim/optimizer_test.cpp (run with /usr/bin/python3, torch 1.13.1).

Seven parameters of different shapes in two groups (group 1: the 1-D ones, weight decay 0) are
trained for 120 steps on stored gradients by torch.optim.AdamW, torch.optim.Adam (L2), and
torch.optim.SGD (momentum/dampening/nesterov/weight decay), and by two small Python
implementations written here from their published formulas: Adam without bias correction
(DeepSpeed FusedAdam, bias_correction=False) and LAMB as DeepSpeed's FusedLamb kernel computes it.
The gradients are bf16-representable and fp16-exact, so the C++ test feeds them as fp32, bf16 or
fp16 and expects the same trajectory. The lr of each group decays linearly over the steps.

Writes tests/reference/fixtures/optim.pt: a dict of tensors, flat parameters concatenated in order.
"""
import math
import os

import torch

SHAPES = [(7, 9), (13,), (5, 11), (33,), (4, 4, 4), (1,), (130,)]
STEPS = 120
SNAPSHOTS = [1, 2, 3, 10, 60, 120]
LR = [1e-2, 5e-3]  # per group
SCALE = [1.0, 0.5, 4.0, 0.02, 1.0, 1.0, 0.3]  # parameter magnitudes: LAMB's ratio hits both clamps


def lr_at(group, step):  # step is 1-based
    return LR[group] * (1.0 - 0.004 * step)


def group_of(shape):
    return 1 if len(shape) == 1 else 0


def make_data():
    g = torch.Generator().manual_seed(1234)
    p0 = [torch.randn(s, generator=g) * SCALE[i] for i, s in enumerate(SHAPES)]
    p0[1].zero_()  # a zero parameter: LAMB's trust ratio is 1 while ||p|| = 0
    n = sum(math.prod(s) for s in SHAPES)
    grads = torch.randn(STEPS, n, generator=g) * torch.logspace(-1, 1, STEPS).unsqueeze(1)
    grads[grads.abs() < 1e-3] = 0  # keep every value a normal fp16 number after bf16 rounding
    grads = grads.to(torch.bfloat16)
    return p0, grads


def split(flat):
    out, o = [], 0
    for s in SHAPES:
        k = math.prod(s)
        out.append(flat[o:o + k].view(s))
        o += k
    return out


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors]).clone()


def run_torch(make_opt, p0, grads, beta_schedule=None):
    params = [p.clone().requires_grad_(True) for p in p0]
    groups = [[p for p, s in zip(params, SHAPES) if group_of(s) == k] for k in (0, 1)]
    opt = make_opt(groups)
    snaps = {}
    for t in range(1, STEPS + 1):
        for p, gr in zip(params, split(grads[t - 1].float())):
            p.grad = gr.clone()
        for k, group in enumerate(opt.param_groups):
            group["lr"] = lr_at(k, t)
            if beta_schedule:
                group["betas"] = beta_schedule(t)
        opt.step()
        if t in SNAPSHOTS:
            snaps[f"p{t}"] = flat(params)
    state = opt.state
    for key in ("exp_avg", "exp_avg_sq", "momentum_buffer"):
        if all(state[p].get(key) is not None for p in params):
            snaps[key] = flat([state[p][key] for p in params])
    return snaps


def run_manual(update, p0, grads):
    """Runs `update(t, group, p, g, m, v)` per parameter; returns the same snapshots."""
    params = [p.clone() for p in p0]
    m = [torch.zeros_like(p) for p in p0]
    v = [torch.zeros_like(p) for p in p0]
    snaps = {}
    for t in range(1, STEPS + 1):
        for i, gr in enumerate(split(grads[t - 1].float())):
            update(t, group_of(SHAPES[i]), params[i], gr, m[i], v[i])
        if t in SNAPSHOTS:
            snaps[f"p{t}"] = flat(params)
    snaps["exp_avg"], snaps["exp_avg_sq"] = flat(m), flat(v)
    return snaps


def adamw_no_bias_correction(wd, b1=0.9, b2=0.999, eps=1e-8):
    def update(t, k, p, g, m, v):
        lr = lr_at(k, t)
        p.mul_(1 - lr * wd[k])
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        p.addcdiv_(m, v.sqrt().add_(eps), value=-lr)
    return update


def fused_lamb(wd, bias_correction, eps_inside_sqrt, max_coeff, min_coeff, b1=0.9, b2=0.999, eps=1e-8):
    """DeepSpeed FusedLamb (csrc/lamb/fused_lamb_cuda_kernel.cu), per parameter tensor."""
    def update(t, k, p, g, m, v):
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (v + eps).sqrt() if eps_inside_sqrt else v.sqrt() + eps
        u = m / denom + wd[k] * p
        w_norm = p.double().pow(2).sum().sqrt().item()
        u_norm = u.double().pow(2).sum().sqrt().item()
        ratio = 1.0 if w_norm == 0 or u_norm == 0 else min(max(w_norm / u_norm, min_coeff), max_coeff)
        step_size = lr_at(k, t)
        if bias_correction:
            step_size *= math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        p.sub_(step_size * ratio * u)
    return update


def main():
    p0, grads = make_data()
    out = {
        "p0": flat(p0),
        "grads": grads,
        "sizes": torch.tensor([math.prod(s) for s in SHAPES]),
        "groups": torch.tensor([group_of(s) for s in SHAPES]),
        "lr": torch.tensor(LR, dtype=torch.float64),
        "snapshots": torch.tensor(SNAPSHOTS),
    }
    wd = [0.1, 0.0]
    configs = {
        "adamw": lambda: run_torch(lambda gs: torch.optim.AdamW(
            [{"params": gs[0], "weight_decay": wd[0]}, {"params": gs[1], "weight_decay": 0.0}], lr=1.0), p0, grads),
        "adam_l2": lambda: run_torch(lambda gs: torch.optim.Adam(
            [{"params": gs[0], "weight_decay": 0.05}, {"params": gs[1], "weight_decay": 0.0}], lr=1.0), p0, grads),
        # OneCycle-style momentum cycling: beta1 changes every step, beta2 = 0.99.
        "adamw_betas": lambda: run_torch(lambda gs: torch.optim.AdamW(
            [{"params": gs[0], "weight_decay": wd[0]}, {"params": gs[1], "weight_decay": 0.0}], lr=1.0), p0, grads,
            beta_schedule=lambda t: (0.85 + 0.1 * (t % 7) / 7, 0.99)),
        "adamw_nobc": lambda: run_manual(adamw_no_bias_correction(wd), p0, grads),
        "sgd": lambda: run_torch(lambda gs: torch.optim.SGD(
            [{"params": gs[0], "weight_decay": 0.01}, {"params": gs[1], "weight_decay": 0.0}], lr=1.0), p0, grads),
        "sgd_momentum": lambda: run_torch(lambda gs: torch.optim.SGD(
            [{"params": gs[0], "weight_decay": 0.01}, {"params": gs[1], "weight_decay": 0.0}], lr=1.0,
            momentum=0.9, dampening=0.1), p0, grads),
        "sgd_nesterov": lambda: run_torch(lambda gs: torch.optim.SGD(
            [{"params": gs[0], "weight_decay": 0.01}, {"params": gs[1], "weight_decay": 0.0}], lr=1.0,
            momentum=0.9, nesterov=True), p0, grads),
        "lamb": lambda: run_manual(fused_lamb(wd, True, False, 10.0, 0.01), p0, grads),
        "lamb_clamped": lambda: run_manual(fused_lamb(wd, False, True, 0.5, 0.2), p0, grads),
    }
    for name, run in configs.items():
        for key, value in run().items():
            out[f"{name}.{key}"] = value
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "optim.pt")
    torch.save(out, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
