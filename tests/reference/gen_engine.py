#!/usr/bin/env python3
"""Reference for the engine's end-to-end step semantics (tests/engine/engine_test.cpp): a tiny MLP
trained 8 optimizer steps in plain PyTorch with what a DeepSpeed config means —
gradient_accumulation_steps=2 (loss / 2 per micro-batch), gradient_clipping=0.5
(torch.nn.utils.clip_grad_norm_), AdamW with weight decay only on >=2-D weights, and DeepSpeed's
WarmupLR (linear, written out here from reference/deepspeed.md §a.3: optimizer step k uses the lr
after k-1 scheduler steps). Saves the initial weights, the micro-batches, every step's mean loss
and the final weights.

Run: /usr/bin/python3 tests/reference/gen_engine.py  (writes tests/reference/fixtures/engine.pt)
"""
import os

import torch
import torch.nn.functional as F

torch.manual_seed(7)
D_IN, HIDDEN, CLASSES, MICRO, GAS, STEPS = 6, 10, 4, 5, 2, 8
W_MIN, W_MAX, W_STEPS = 0.0, 0.02, 4


def warmup_lr_after(n):
    """lr in the optimizer after n scheduler steps (n = 0: at construction)."""
    if n == 0:
        return W_MIN
    t = n - 1
    wn = max(2, W_STEPS)
    gamma = t / wn if t < wn else 1.0
    return W_MIN + (W_MAX - W_MIN) * gamma


params = {
    "fc1.weight": torch.randn(HIDDEN, D_IN) * 0.5,
    "fc1.bias": torch.randn(HIDDEN) * 0.1,
    "fc2.weight": torch.randn(CLASSES, HIDDEN) * 0.5,
    "fc2.bias": torch.randn(CLASSES) * 0.1,
}
init = {k: v.clone() for k, v in params.items()}
for p in params.values():
    p.requires_grad_(True)
inputs = torch.randn(STEPS * GAS, MICRO, D_IN)
targets = torch.randint(0, CLASSES, (STEPS * GAS, MICRO))


def loss_fn(x, y):
    h = F.gelu(F.linear(x, params["fc1.weight"], params["fc1.bias"]))
    return F.cross_entropy(F.linear(h, params["fc2.weight"], params["fc2.bias"]), y)


decay = [params["fc1.weight"], params["fc2.weight"]]
no_decay = [params["fc1.bias"], params["fc2.bias"]]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=W_MIN, betas=(0.9, 0.95), eps=1e-8)
losses, norms = [], []
for k in range(1, STEPS + 1):
    total = 0.0
    for m in range(GAS):
        i = (k - 1) * GAS + m
        loss = loss_fn(inputs[i], targets[i])
        total += loss.item()
        (loss / GAS).backward()
    norms.append(torch.nn.utils.clip_grad_norm_(list(params.values()), 0.5).item())
    for g in opt.param_groups:
        g["lr"] = warmup_lr_after(k - 1)
    opt.step()
    opt.zero_grad()
    losses.append(total / GAS)

out = {f"init/{k}": v for k, v in init.items()}
out.update({f"final/{k}": v.detach().clone() for k, v in params.items()})
out["inputs"] = inputs
out["targets"] = targets
out["losses"] = torch.tensor(losses, dtype=torch.float64)
out["grad_norms"] = torch.tensor(norms, dtype=torch.float64)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "engine.pt")
torch.save(out, path)
print("wrote", path)
