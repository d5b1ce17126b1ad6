#!/usr/bin/python3
"""The same sweep as bench/collective_sweep.cpp through Debian's torch.distributed (the same Gloo
library LibTorch links), for when the C++ program is not built, and as the peer of xtrain's rings:
all_reduce (Gloo's ring), a ring reduce-scatter over isend/irecv (torch 1.13's Gloo has no
reduce_scatter; one whole slice per message, as xtrain's ring did before it pipelined pieces) and
Gloo's all_gather, fp32, a barrier before each repetition, the median of REPS averaged
over ranks. Rank 0 prints one JSON object per (op, bytes). Ranks from RANK/WORLD_SIZE/MASTER_*.
  usage: collective_sweep.py [reps] [max_bytes]
"""
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist


def ring_reduce_scatter(buf, out, rank, w):
    """Slice (rank - 1 - s) travels around the ring, summed at each hop; rank r ends with slice r."""
    chunks = list(buf.chunk(w))
    acc = chunks[(rank - 1) % w].clone()
    recv = torch.empty_like(acc)
    for s in range(w - 1):
        send_req = dist.isend(acc, (rank + 1) % w)
        dist.recv(recv, (rank - 1) % w)
        send_req.wait()
        acc = recv + chunks[(rank - 2 - s) % w]
    out.copy_(acc)


def time_op(reps, op):
    op()
    t = []
    for _ in range(reps):
        dist.barrier()
        start = time.perf_counter()
        op()
        t.append(time.perf_counter() - start)
    m = torch.tensor([statistics.median(t)], dtype=torch.float64)
    dist.all_reduce(m)
    return m.item() / dist.get_world_size()


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    max_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 64 << 20
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, w = dist.get_rank(), dist.get_world_size()
    size = 4096
    while size <= max_bytes:
        n = size // 4 // w * w
        buf, out = torch.ones(n), torch.empty(n // w)
        ar = time_op(reps, lambda: dist.all_reduce(buf))
        rs = time_op(reps, lambda: ring_reduce_scatter(buf, out, rank, w))
        ag = time_op(reps, lambda: dist.all_gather(list(buf.chunk(w)), out))
        if rank == 0:
            for op, sec in (("all_reduce", ar), ("reduce_scatter", rs), ("all_gather", ag)):
                print(json.dumps({"op": op, "world": w, "bytes": n * 4, "seconds": sec}), flush=True)
        size *= 4
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
