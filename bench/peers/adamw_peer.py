#!/usr/bin/python3
"""The PyTorch peer for bench/fused_adamw.cpp: one torch.optim.AdamW step (lr 1e-3, weight decay
0.1) on a single fp32 parameter of N elements with a fixed gradient, timed as the C++ bench times
its own (2 warm-up steps, median of the repeats), for the default implementation (in torch 1.13 on
CPU: the single-tensor loop) and foreach=True. Prints one `torch ...` line per (impl, size, threads).

Run with Debian's interpreter: /usr/bin/python3 bench/peers/adamw_peer.py --sizes 10000000 --threads 2,1
"""
import argparse
import statistics
import time

import torch


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
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000000,100000000")
    ap.add_argument("--threads", default="2,1")
    ap.add_argument("--reps", type=int, default=11)
    args = ap.parse_args()
    with torch.no_grad():
        for n in (int(x) for x in args.sizes.split(",")):
            for threads in (int(x) for x in args.threads.split(",")):
                for foreach in (False, True):
                    bench(n, threads, foreach, args.reps)


if __name__ == "__main__":
    main()
