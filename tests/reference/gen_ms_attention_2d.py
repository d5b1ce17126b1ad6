#!/usr/bin/env python3
"""Fixture for 2-D multi-scale attention (docs/design/multiscale-attention-2d.md), computed
independently of the C++ code: for every query separately, the blocks it sees come from
docs/design/partition_check_2d.py's `blocks` (the executable rule), each block's K and V are the
mean over its patches sliced out of the grid, the class token (if any) is one more key of size 1,
and one softmax over score + log(size) gives the output. float64 PyTorch, autograd for gradients.

Writes tests/reference/fixtures/ms_attention_2d.pt: for each case "<name>/q|k|v|dout|out|dq|dk|dv"
and "<name>/meta" = [cls, B, NH, gh, gw, HS, window_1, ..., window_S]; T = gh*gw + cls tokens,
token 0 the class token when cls = 1. Heads are split over the windows as numpy's array_split.
Run with Debian's interpreter: /usr/bin/python3 tests/reference/gen_ms_attention_2d.py
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "design"))
from partition_check_2d import blocks  # noqa: E402  (the design page's rule, not the C++ one)


def block_mean(x, l, a, b, gh, gw):
    """x: [gh, gw, d]; the mean of block (a, b) of level l and its number of patches."""
    z = 2**l
    part = x[a * z:min((a + 1) * z, gh), b * z:min((b + 1) * z, gw)]
    return part.reshape(-1, x.shape[-1]).mean(0), part.shape[0] * part.shape[1]


def one_head(q, k, v, gh, gw, w, cls):
    """q, k, v: [T, d] of one head; returns [T, d] by looping over queries."""
    d, c0 = q.shape[-1], int(cls)
    kg, vg = k[c0:].reshape(gh, gw, d), v[c0:].reshape(gh, gw, d)
    outs = []
    if cls:  # the class query sees every patch and itself
        keys, vals = k, v
        p = torch.softmax(keys @ q[0] / math.sqrt(d), dim=0)
        outs.append(p @ vals)
    for t in range(gh * gw):
        r, c = divmod(t, gw)
        keys, vals, logs = [], [], []
        for l, a, b in blocks(r, c, gh, gw, w):
            km, size = block_mean(kg, l, a, b, gh, gw)
            vm, _ = block_mean(vg, l, a, b, gh, gw)
            keys.append(km)
            vals.append(vm)
            logs.append(math.log(size))
        if cls:
            keys.append(k[0])
            vals.append(v[0])
            logs.append(0.0)
        scores = torch.stack(keys) @ q[c0 + t] / math.sqrt(d) + torch.tensor(logs, dtype=q.dtype)
        outs.append(torch.softmax(scores, dim=0) @ torch.stack(vals))
    return torch.stack(outs)


def ms_attention_2d(q, k, v, windows, gh, gw, cls):
    B, H = q.shape[0], q.shape[1]
    S = len(windows)
    sizes = [H // S + (1 if g < H % S else 0) for g in range(S)]
    window_of = [w for g, w in enumerate(windows) for _ in range(sizes[g])]
    return torch.stack([torch.stack([one_head(q[b, h], k[b, h], v[b, h], gh, gw, window_of[h], cls)
                                     for h in range(H)]) for b in range(B)])


CASES = [
    # name, cls, B, NH, gh, gw, HS, windows
    ("g1x1", False, 1, 1, 1, 1, 3, [2]),
    ("g1x1_cls", True, 2, 2, 1, 1, 3, [1, 4]),
    ("g1x5", False, 2, 2, 1, 5, 4, [1, 3]),
    ("g1x5_cls", True, 1, 3, 1, 5, 4, [2, 4]),
    ("g3x4", False, 1, 3, 3, 4, 5, [1, 2]),
    ("g3x4_cls", True, 2, 2, 3, 4, 3, [3]),
    ("g7x7", False, 1, 4, 7, 7, 4, [1, 2, 3]),
    ("g7x7_cls", True, 1, 3, 7, 7, 4, [2, 4]),
]


def main():
    torch.manual_seed(0)
    out = {}
    for name, cls, B, H, gh, gw, d, windows in CASES:
        T = gh * gw + int(cls)
        q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
        dout = torch.randn(B, H, T, d, dtype=torch.float64)
        y = ms_attention_2d(q, k, v, windows, gh, gw, cls)
        dq, dk, dv = torch.autograd.grad(y, (q, k, v), dout)
        for key, t in [("q", q), ("k", k), ("v", v), ("dout", dout), ("out", y), ("dq", dq), ("dk", dk), ("dv", dv)]:
            out[f"{name}/{key}"] = t.detach().clone()
        out[f"{name}/meta"] = torch.tensor([int(cls), B, H, gh, gw, d] + windows, dtype=torch.int64)
    path = os.path.join(HERE, "fixtures", "ms_attention_2d.pt")
    torch.save(out, path)
    print(f"wrote {path} ({len(CASES)} cases)")


if __name__ == "__main__":
    main()
