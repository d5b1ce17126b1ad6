#!/usr/bin/env python3
"""Reference for xtrain.param_groups (tests/optim/param_groups_test.cpp): a tiny MLP trained 6 steps
with torch.optim.AdamW over two parameter groups, as DeepSpeed users pass them through
model_parameters: fc1.* at lr 0.01 with weight decay 0.1, fc2.* at lr 0.005 (lr_scale 0.5) with no
weight decay. One batch of 8 samples per step (the test splits it over 2 ranks at ZeRO stage 2).
Saves the initial weights, the batches and the final weights.

Run: /usr/bin/python3 tests/reference/gen_param_groups.py  (writes tests/reference/fixtures/param_groups.pt)
"""
import os

import torch
import torch.nn.functional as F

torch.manual_seed(3)
D_IN, HIDDEN, CLASSES, BATCH, STEPS, LR = 6, 8, 4, 8, 6, 0.01

params = {
    "fc1.weight": torch.randn(HIDDEN, D_IN) * 0.5,
    "fc1.bias": torch.randn(HIDDEN) * 0.1,
    "fc2.weight": torch.randn(CLASSES, HIDDEN) * 0.5,
    "fc2.bias": torch.randn(CLASSES) * 0.1,
}
init = {k: v.clone() for k, v in params.items()}
for p in params.values():
    p.requires_grad_(True)
inputs = torch.randn(STEPS, BATCH, D_IN)
targets = torch.randint(0, CLASSES, (STEPS, BATCH))

groups = [
    {"params": [params["fc1.weight"], params["fc1.bias"]], "lr": LR, "weight_decay": 0.1},
    {"params": [params["fc2.weight"], params["fc2.bias"]], "lr": LR * 0.5, "weight_decay": 0.0},
]
opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
for k in range(STEPS):
    h = F.gelu(F.linear(inputs[k], params["fc1.weight"], params["fc1.bias"]))
    loss = F.cross_entropy(F.linear(h, params["fc2.weight"], params["fc2.bias"]), targets[k])
    loss.backward()
    opt.step()
    opt.zero_grad()

out = {f"init/{k}": v for k, v in init.items()}
out.update({f"final/{k}": v.detach().clone() for k, v in params.items()})
out["inputs"] = inputs
out["targets"] = targets
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "param_groups.pt")
torch.save(out, path)
print("wrote", path)
