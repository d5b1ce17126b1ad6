#!/usr/bin/env python3
"""Reference for xtrain's AMP mode (tests/engine/mixed_precision_test.cpp): the engine test's tiny
MLP (gen_engine.py's weights and first micro-batch) run forward and backward under
torch.autocast("cpu", dtype=torch.bfloat16) with fp32 parameters, as PyTorch AMP does. Saves the
loss and every parameter's (fp32) gradient.

Run: /usr/bin/python3 tests/reference/gen_amp.py  (reads fixtures/engine.pt, writes fixtures/amp.pt)
"""
import os

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
fx = torch.load(os.path.join(here, "fixtures", "engine.pt"))
names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
params = {n: fx["init/" + n].clone().requires_grad_(True) for n in names}
x, y = fx["inputs"][0], fx["targets"][0]
with torch.autocast("cpu", dtype=torch.bfloat16):
    h = F.gelu(F.linear(x, params["fc1.weight"], params["fc1.bias"]))
    logits = F.linear(h, params["fc2.weight"], params["fc2.bias"])
loss = F.cross_entropy(logits.float(), y)
loss.backward()
out = {"loss": loss.detach().double(), "logits_dtype_is_bf16": torch.tensor(logits.dtype == torch.bfloat16)}
out.update({"grad/" + n: p.grad.clone() for n, p in params.items()})
path = os.path.join(here, "fixtures", "amp.pt")
torch.save(out, path)
print("wrote", path, "loss", loss.item())
