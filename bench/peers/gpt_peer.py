#!/usr/bin/env python3
"""The PyTorch peer for xtrain's GPT training benchmarks: the same model (pre-LayerNorm decoder,
fused QKV, GELU-tanh MLP, tied embeddings, GPT-2 init) and the same step (AdamW, grad clipping 1.0)
written in plain PyTorch eager, timed the same way. Prints one JSON line.

Threads: `--tuning expert` (the default) re-executes the script with the environment an expert sets
before torch is imported (expert_env.py: OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = --threads, passive
waiting, huge-page malloc); `--tuning shipped` only calls torch.set_num_threads. The JSON line
says which, with the variables and the thread counts torch and OpenBLAS report.

Run with Debian's interpreter: /usr/bin/python3 bench/peers/gpt_peer.py --layers 4 --d 256 ...
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expert_env  # noqa: E402

expert_env.pin()  # before torch loads OpenMP and OpenBLAS

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, C, NH, T):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fc_proj = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        k = k.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        v = v.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))) + self.mask[:T, :T]
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, NH, T) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--tuning", choices=["shipped", "expert"], default="expert")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.layers, a.d, a.heads, a.seq, a.vocab)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    data = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    x, y = data[:, :-1], data[:, 1:]
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    step = statistics.median(times)
    print(json.dumps({
        "impl": "pytorch", "dtype": a.dtype, "threads": a.threads,
        "params": sum(p.numel() for p in model.parameters()),
        "step_ms": step * 1e3, "tokens_per_s": a.batch * a.seq / step,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_loss": loss.item(), "settings": expert_env.settings(torch, a.tuning),
    }))


if __name__ == "__main__":
    main()
