#!/usr/bin/env python3
"""The PyTorch side of bench/default_run_quality.sh: the best plain-PyTorch recipe for training a
byte-level GPT on Moby Dick in a fixed wall-time budget on this machine, written as an expert would.

Model: bench/peers/gpt_peer.py's GPT (the default model's architecture: 4 layers, d 256, 4 heads,
context 256, tied embeddings, GPT-2 init), batch 16 of random 256-byte windows of the first 90% of
the text, validation on the last 10% (as xtrain's text dataset splits it). Recipe: xtrain's default
(AdamW lr 2e-3, betas 0.9/0.95, weight decay 0.1 on matrices, 50 linear warm-up steps, cosine to
0.1x, clipping 1.0), with the two choices an expert makes for a time budget:
  - precision: fp32 or bf16 autocast, whichever runs faster here (both timed for a few steps before
    the clock starts: --dtype auto), and
  - the schedule's length: the cosine ends when the budget does (steps = budget / measured step).
Process settings: bench/peers/expert_env.py (threads and passive waiting before torch loads,
huge-page malloc, OpenBLAS's own CPU detection).

The clock starts before the first training step and includes validation (every --eval-every steps,
--eval-batches batches of 16 random windows, fixed seed), as xtrain's run does. Prints one JSON line
per validation ({"t": seconds, "step", "val"}) and a last line with the full-split score: every
non-overlapping 256-byte window of the validation text, in fp32. `--score RUN` gives that same score
for an xtrain run's final weights (xtrain.load_state_dict, names mapped onto this model), so both
sides' final figures come from one evaluator.

  /usr/bin/python3 bench/peers/default_run_peer.py --data ~/.cache/xtrain/data/mobydick/data.txt
  PYTHONPATH=build/python /usr/bin/python3 bench/peers/default_run_peer.py --data ... --score runs/x
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expert_env  # noqa: E402

expert_env.pin()  # before torch loads OpenMP and OpenBLAS

from gpt_peer import GPT  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

T, B = 256, 16


def lr_at(step, total, base=2e-3, warmup=50, min_ratio=0.1):
    if step < warmup:
        return base * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def windows(data, starts):
    idx = torch.stack([data[s:s + T + 1] for s in starts.tolist()]).long()
    return idx[:, :-1], idx[:, 1:]


def make_step(model, opt, dtype):
    def step(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            loss = F.cross_entropy(model(x).float().view(-1, 256), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


@torch.no_grad()
def evaluate(model, val, starts, dtype):
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(starts), B):
        x, y = windows(val, starts[i:i + B])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            loss = F.cross_entropy(model(x).float().view(-1, 256), y.reshape(-1), reduction="sum")
        total += loss.item()
        n += y.numel()
    model.train()
    return total / n


def new_model():
    torch.manual_seed(1234)
    model = GPT(4, 256, 4, T, 256)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.95))
    return model, opt


def step_seconds(dtype, train, gen, steps=8):
    model, opt = new_model()
    step = make_step(model, opt, dtype)
    times = []
    for _ in range(steps):
        x, y = windows(train, torch.randint(0, len(train) - T - 1, (B,), generator=gen))
        t0 = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - t0)
    return min(times[2:])  # the least disturbed step: the machine is shared at times


def full_score(model, val):
    return evaluate(model, val, torch.arange(0, len(val) - T - 1, T), "fp32")


def score_xtrain_run(run_dir, val):
    import xtrain  # build/python on PYTHONPATH
    rename = {".attn.qkv.": ".qkv.", ".attn.proj.": ".proj.", ".mlp.fc.": ".fc.", ".mlp.proj.": ".fc_proj."}
    state = {}
    for name, tensor in xtrain.load_state_dict(run_dir).items():
        for old, new in rename.items():
            name = name.replace(old, new)
        state[name] = tensor.float()
    model, _ = new_model()
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(m.endswith("mask") for m in missing), (missing, unexpected)
    print(json.dumps({"run": run_dir, "val_full": full_score(model, val)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--score", help="an xtrain run directory: print its final weights' full-split score and exit")
    ap.add_argument("--data", required=True)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--dtype", choices=["auto", "fp32", "bf16"], default="auto")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    text = torch.frombuffer(bytearray(open(a.data, "rb").read()), dtype=torch.uint8)
    n_val = int(math.floor(len(text) * 0.1))
    train, val = text[:len(text) - n_val], text[len(text) - n_val:]
    if a.score:
        return score_xtrain_run(a.score, val)
    gen = torch.Generator().manual_seed(1234)
    probe = {d: step_seconds(d, train, gen) for d in (["fp32", "bf16"] if a.dtype == "auto" else [a.dtype])}
    dtype = min(probe, key=probe.get)
    total = max(100, int(a.seconds / probe[dtype]))
    print(json.dumps({"probe_step_s": probe, "dtype": dtype, "planned_steps": total,
                      "settings": expert_env.settings(torch, "expert")}), flush=True)

    model, opt = new_model()
    step = make_step(model, opt, dtype)
    eval_gen = torch.Generator().manual_seed(0x5eed)
    eval_starts = torch.randint(0, len(val) - T - 1, (a.eval_batches * B,), generator=eval_gen)
    t0 = time.perf_counter()
    i = 0
    while time.perf_counter() - t0 < a.seconds and i < total:
        for g in opt.param_groups:
            g["lr"] = lr_at(i, total)
        x, y = windows(train, torch.randint(0, len(train) - T - 1, (B,), generator=gen))
        loss = step(x, y)
        i += 1
        if i % a.eval_every == 0 or i == total:
            v = evaluate(model, val, eval_starts, dtype)
            print(json.dumps({"t": time.perf_counter() - t0, "step": i, "val": v, "train": loss.item()}), flush=True)
    full = full_score(model, val)
    print(json.dumps({"final": True, "t": time.perf_counter() - t0, "step": i, "val_full": full}), flush=True)


if __name__ == "__main__":
    main()
