#!/usr/bin/python3
"""The PyTorch peer for bench/fused_adamw.cpp: one torch.optim.AdamW step (lr 1e-3, weight decay
0.1) on a single fp32 parameter of N elements with a fixed gradient, timed as the C++ bench times
its own (2 warm-up steps, median of the repeats), for the default implementation (in torch 1.13 on
CPU: the single-tensor loop) and foreach=True. Prints one `torch ...` line per (impl, size, threads).

Threads: each thread count runs in its own process, in the environment an expert sets before torch
is imported (expert_env.py: OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = the count, passive waiting);
`--tuning shipped` instead only calls torch.set_num_threads. A `settings` line per process says
what it ran with.

Run with Debian's interpreter: /usr/bin/python3 bench/peers/adamw_peer.py --sizes 10000000 --threads 2,1
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expert_env  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000000,100000000")
    ap.add_argument("--threads", default="2,1")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--tuning", choices=["shipped", "expert"], default="expert")
    return ap.parse_args()


ARGS = parse_args()
THREADS = [int(x) for x in ARGS.threads.split(",")]
if len(THREADS) > 1:  # one process per thread count: the libraries read the environment once
    for t in THREADS:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--sizes", ARGS.sizes, "--threads", str(t),
                        "--reps", str(ARGS.reps), "--tuning", ARGS.tuning], check=True)
    sys.exit(0)
expert_env.pin(["--threads", str(THREADS[0]), "--tuning", ARGS.tuning])

import torch  # noqa: E402


def median_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench(n, threads, foreach, reps):
    torch.set_num_threads(threads)
    p = torch.nn.Parameter(torch.randn(n) * 0.02)
    p.grad = torch.randn(n)
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.1, foreach=foreach)
    ms = median_ms(opt.step, 2, reps)
    impl = "torch_foreach" if foreach else "torch_default"
    print(f"torch impl={impl} n={n} threads={threads} adamw_ms={ms:.3f} adamw_gbps={28.0 * n / ms / 1e6:.2f}",
          flush=True)


def main():
    print("settings " + json.dumps(expert_env.settings(torch, ARGS.tuning)), flush=True)
    with torch.no_grad():
        for n in (int(x) for x in ARGS.sizes.split(",")):
            for foreach in (False, True):
                bench(n, THREADS[0], foreach, ARGS.reps)


if __name__ == "__main__":
    main()
