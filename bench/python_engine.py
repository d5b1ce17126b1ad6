#!/usr/bin/env python3
"""One side of bench/python_engine.sh: the same Python GPT (bench/peers/gpt_peer.py's model: pre-LN
decoder, fused QKV, GELU-tanh MLP, tied embeddings, GPT-2 init) trained either with plain PyTorch as
an expert writes it (torch.optim.AdamW, clip_grad_norm_, autocast for bf16) or through
xtrain.initialize (the engine's fused AdamW, clipping and bf16 with fp32 master weights), the same
optimizer settings on both sides. Prints one JSON line: tokens/s over all ranks (median step).

The process settings come first (bench/peers/expert_env.py, before torch is imported): with
--tuning expert (the default) OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = --threads and passive waiting,
for both sides, so the comparison is the engine and not the thread setup. Under `xtrain launch -N 2`
each rank trains its own micro-batch (DP, or ZeRO with --zero; xtrain.initialize joins the group
from the launcher's variables); --impl xtrain only.

  /usr/bin/python3 bench/python_engine.py --impl pytorch --shape small --dtype fp32
  PYTHONPATH=build/python /usr/bin/python3 bench/python_engine.py --impl xtrain --shape small
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
import expert_env  # noqa: E402

expert_env.pin()  # before torch loads OpenMP and OpenBLAS

from gpt_peer import GPT  # noqa: E402  (it pins too: a no-op in the pinned environment)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SHAPES = {  # layers, d, heads, T, B, vocab: bench/cpu_train.sh's two shapes
    "small": (4, 256, 4, 256, 8, 256),
    "gpt2": (12, 768, 12, 64, 4, 50257),
}
LR, BETAS, WD, CLIP = 1e-3, (0.9, 0.95), 0.1, 1.0


def param_groups(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}]


def pytorch_step(model, a):
    opt = torch.optim.AdamW(param_groups(model), lr=LR, betas=BETAS)

    def step(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = F.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def xtrain_step(model, a, B):
    import xtrain

    config = {
        "train_micro_batch_size_per_gpu": B,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": LR, "betas": list(BETAS), "weight_decay": WD}},
        "gradient_clipping": CLIP,
        "bf16": {"enabled": a.dtype == "bf16"},
        "zero_optimization": {"stage": a.zero},
    }
    engine, _, _, _ = xtrain.initialize(model=model, model_parameters=param_groups(model), config=config)

    def step(x, y):
        loss = F.cross_entropy(engine(x).float().flatten(0, 1), y.flatten())
        engine.backward(loss)
        engine.step()
        return loss

    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["pytorch", "xtrain"], required=True)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--zero", type=int, default=0, help="ZeRO stage (xtrain only)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tuning", choices=["shipped", "expert"], default="expert")
    a = ap.parse_args()
    L, C, NH, T, B, V = SHAPES[a.shape]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if a.impl == "pytorch" and (world > 1 or a.zero):
        sys.exit("python_engine.py: --impl pytorch runs one rank without ZeRO")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(L, C, NH, T, V)
    step = pytorch_step(model, a) if a.impl == "pytorch" else xtrain_step(model, a, B)
    data = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(1 + rank))
    x, y = data[:, :-1], data[:, 1:]
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = step(x, y)
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    if rank == 0:
        s = statistics.median(times)
        print(json.dumps({"impl": a.impl, "shape": a.shape, "dtype": a.dtype, "zero": a.zero, "ranks": world,
                          "threads": a.threads, "step_ms": s * 1e3, "tokens_per_s": world * B * T / s,
                          "final_loss": loss.item(), "settings": expert_env.settings(torch, a.tuning)}),
              flush=True)


if __name__ == "__main__":
    main()
