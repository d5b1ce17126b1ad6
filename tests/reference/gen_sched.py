#!/usr/bin/python3
"""Reference learning rates for tests/sched/schedule_test.cpp (run with /usr/bin/python3).

DeepSpeed's five schedules are computed here from the formulas in /work/shared/reference/
deepspeed.md §a.3 (written independently of DeepSpeed's code and of the C++), for every step
n = 0 .. N (n = completed scheduler steps; n = 0 is the value written at construction). The
"Adaptive" schedule is simulated from its specification in src/xtrain/sched/adaptive.h on scripted
loss curves. Writes tests/reference/fixtures/sched.pt (float64 tensors).
"""
import math
import os

import torch

# name -> (type, params, base_lr, N). The C++ test holds the same table.
CONFIGS = {
    "warmup_log": ("WarmupLR", dict(min=1e-4, max=1e-3, W=10, kind="log"), 0.0, 30),
    "warmup_linear": ("WarmupLR", dict(min=0.0, max=0.01, W=15, kind="linear"), 0.0, 30),
    "warmup_w1": ("WarmupLR", dict(min=0.1, max=0.2, W=1, kind="linear"), 0.0, 8),
    "decay_log": ("WarmupDecayLR", dict(min=0.0, max=1e-3, W=10, T=50, kind="log"), 0.0, 60),
    "decay_linear": ("WarmupDecayLR", dict(min=1e-5, max=1e-3, W=19, T=40, kind="linear"), 0.0, 50),
    "decay_short": ("WarmupDecayLR", dict(min=0.0, max=1e-3, W=8, T=5, kind="log"), 0.0, 15),
    "cosine_log": ("WarmupCosineLR", dict(T=100, W=10, cos_min=0.1, wmin=0.2, kind="log"), 0.0015, 110),
    "cosine_linear": ("WarmupCosineLR", dict(T=60, W=30, cos_min=0.0, wmin=0.0, kind="linear"), 3e-4, 70),
    "onecycle": ("OneCycle", dict(lo=1e-3, hi=1e-2, s1=10, s2=None, lr_decay=1e-3, decay_size=10,
                                  mom=True, mom_lo=0.85, mom_hi=0.95, mom_decay=1e-3), 0.0, 45),
    "onecycle_asym": ("OneCycle", dict(lo=1e-4, hi=1e-3, s1=7, s2=13, lr_decay=0.0, decay_size=0,
                                       mom=True, mom_lo=0.8, mom_hi=0.9, mom_decay=0.0), 0.0, 30),
    "onecycle_nomom": ("OneCycle", dict(lo=0.0, hi=0.1, s1=5, s2=None, lr_decay=0.5, decay_size=3,
                                        mom=False, mom_lo=0.8, mom_hi=0.9, mom_decay=0.0), 0.0, 20),
    "lrrt": ("LRRangeTest", dict(lo=1e-3, size=10, rate=1.0, stair=False), 0.0, 40),
    "lrrt_stair": ("LRRangeTest", dict(lo=1e-4, size=7, rate=0.5, stair=True), 0.0, 40),
    "warmup_resume": ("WarmupLR", dict(min=0.0, max=0.01, W=15, kind="linear", last=4), 0.0, 20),
}


def warmup_fraction(t, wn, kind):
    return math.log(t + 1) / math.log(wn) if kind == "log" else t / wn


def warmup_lr(c, t, decay):
    if t < 0:
        return c["min"], None
    wn = max(2, c["W"])
    if t < wn:
        gamma = warmup_fraction(t, wn, c["kind"])
    elif decay:
        gamma = max(0.0, (c["T"] - t) / max(1, c["T"] - wn))
    else:
        gamma = 1.0
    return c["min"] + (c["max"] - c["min"]) * gamma, None


def cosine_lr(c, t, base):
    if t < 0:
        return 0.0, None
    wn = max(2, c["W"])
    if t < wn:
        ratio = c["wmin"] + (1 - c["wmin"]) * warmup_fraction(t, wn, c["kind"])
    else:
        s, total = t - wn + 1, c["T"] - wn
        ratio = max(0.0, c["cos_min"] + (1 - c["cos_min"]) * (1 + math.cos(math.pi * s / total)) / 2)
    return base * ratio, None


def one_cycle(c, t, n):
    s1 = c["s1"]
    s2 = s1 if c["s2"] is None else c["s2"]
    total = s1 + s2
    rho = s1 / total
    if t < total:
        b = t + 1
        cyc = math.floor(1 + b / total)
        x = 1 + b / total - cyc
        f = x / rho if x <= rho else (x - 1) / (rho - 1)
        lr = c["lo"] + (c["hi"] - c["lo"]) * f
        beta1 = c["mom_hi"] - (c["mom_hi"] - c["mom_lo"]) * f
    else:
        d = t - total + 1
        no_lr_decay = c["decay_size"] == 0 or c["lr_decay"] == 0
        no_mom_decay = c["decay_size"] == 0 or c["mom_decay"] == 0
        lr = c["lo"] if no_lr_decay else c["lo"] / (1 + c["lr_decay"] * d / c["decay_size"])
        beta1 = c["mom_hi"] if no_mom_decay else c["mom_hi"] * (1 + c["mom_decay"] * d / c["decay_size"])
    if not c["mom"]:
        return lr, (-1.0, -1.0)
    if n == 0:  # construction writes (cycle_min_mom, 0.99)
        return lr, (c["mom_lo"], 0.99)
    return lr, (beta1, 0.99)


def range_test(c, t):
    b = t + 1
    k = math.floor(b / c["size"]) if c["stair"] else b / c["size"]
    return c["lo"] * (1 + c["rate"] * k), None


def schedule_value(kind, c, base, n):
    t = c.get("last", -1) + n
    if kind in ("WarmupLR", "WarmupDecayLR"):
        return warmup_lr(c, t, kind == "WarmupDecayLR")
    if kind == "WarmupCosineLR":
        return cosine_lr(c, t, base)
    if kind == "OneCycle":
        return one_cycle(c, t, n)
    return range_test(c, t)


# Adaptive, simulated from the rules in src/xtrain/sched/adaptive.h.
ADAPTIVE = dict(peak=1e-3, W=20, smoothing=0.9, patience=10, growth=1.5, factor=0.5, threshold=0.01, cooldown=5,
                min_lr=1e-4)


def adaptive_cuts(losses, a=ADAPTIVE):
    ema, count, tracking, best, wait, cooldown, patience, lr, floor = 0.0, 0, False, 0.0, 0, 0, a["patience"], \
        a["peak"], False
    cuts = []
    for n, loss in enumerate(losses, start=1):
        if not math.isfinite(loss):
            continue
        ema = a["smoothing"] * ema + (1 - a["smoothing"]) * loss
        count += 1
        s = ema / (1 - a["smoothing"] ** count)
        if n < a["W"]:
            continue
        if not tracking:
            tracking, best = True, s
            continue
        improved = best - s > a["threshold"] * abs(best)
        if improved:
            best = s
        if cooldown > 0:
            cooldown -= 1
            wait = 0
            continue
        wait = 0 if improved else wait + 1
        if wait >= patience and not floor:
            lr = max(a["min_lr"], lr * a["factor"])
            cuts.append((n, lr))
            patience = math.floor(patience * a["growth"] + 0.5)
            best, wait, cooldown = s, 0, a["cooldown"]
            floor = lr <= a["min_lr"]
    return cuts


def adaptive_curves():
    g = torch.Generator().manual_seed(5)
    n = 300
    k = torch.arange(1, n + 1, dtype=torch.float64)
    noisy = 3.0 * torch.exp(-k / 60) + 1.0 + 0.05 * torch.randn(n, generator=g, dtype=torch.float64)
    noisy[150] = float("nan")  # ignored
    stairs = torch.where(k < 120, 2.0 - k / 200, torch.where(k < 200, 1.4 - (k - 120) / 1000, 1.32 + 0 * k))
    return {"adaptive_noisy": noisy, "adaptive_stairs": stairs, "adaptive_flat": torch.full((n,), 1.0,
                                                                                            dtype=torch.float64)}


def main():
    out = {}
    for name, (kind, c, base, n_max) in CONFIGS.items():
        lrs, b1, b2 = [], [], []
        for n in range(n_max + 1):
            lr, betas = schedule_value(kind, c, base, n)
            lrs.append(lr)
            if betas is not None:
                b1.append(betas[0])
                b2.append(betas[1])
        out[f"{name}.lr"] = torch.tensor(lrs, dtype=torch.float64)
        if b1:
            out[f"{name}.beta1"] = torch.tensor(b1, dtype=torch.float64)
            out[f"{name}.beta2"] = torch.tensor(b2, dtype=torch.float64)
    for name, losses in adaptive_curves().items():
        cuts = adaptive_cuts(losses.tolist())
        out[f"{name}.loss"] = losses
        out[f"{name}.cut_steps"] = torch.tensor([s for s, _ in cuts], dtype=torch.int64)
        out[f"{name}.cut_lrs"] = torch.tensor([lr for _, lr in cuts], dtype=torch.float64)
        print(name, cuts)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sched.pt")
    torch.save(out, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
