#!/usr/bin/env python3
"""Fixture for multi-scale attention: shared/design/multiscale-attention.md implemented directly in
PyTorch (float64), independently of the C++ code: the key-selection rules as the page states
them, pooled levels as explicit segment means, one masked softmax, autograd for the gradients.
Also plain dense attention (causal and bidirectional) for the dense reference.

Writes tests/reference/fixtures/ms_attention.pt: for each case "<name>/q|k|v|dout|out|dq|dk|dv"
and "<name>/meta" = [causal, B, NH, T, HS, window_1, ..., window_S] (no windows: dense). The
heads are split over the windows as the page's "Shapes and parameters" says (numpy's array_split).
Run with Debian's interpreter: /usr/bin/python3 tests/reference/gen_ms_attention.py
"""
import math
import os

import torch


def down(x, a):
    return (x // a) * a


def up(x, a):
    return -((-x) // a) * a


def causal_segments(i, w):
    """(level, segment) pairs query i sees: e(0) = i + 1, s(l) = max(0, down(e(l) - w 2^l, 2^(l+1)))."""
    out, e, l = [], i + 1, 0
    while True:
        s = max(0, down(e - w * 2**l, 2 ** (l + 1)))
        out += [(l, m) for m in range(s // 2**l, e // 2**l)]
        if s == 0:
            return out
        e, l = s, l + 1


def bidirectional_segments(i, n, w):
    s = max(0, down(i - w // 2, 2))
    f = min(n, up(i + 1 + math.ceil(w / 2), 2))
    out, l = [(0, m) for m in range(s, f)], 1
    while s > 0 or f < n:
        ns = max(0, down(s - (w // 2) * 2**l, 2 ** (l + 1)))
        nf = min(n, up(f + (w // 2) * 2**l, 2 ** (l + 1)))
        out += [(l, m) for m in range(ns // 2**l, s // 2**l)]
        if f < n:
            out += [(l, m) for m in range(f // 2**l, math.ceil(nf / 2**l))]
        s, f, l = ns, nf, l + 1
    return out


def levels(n):
    """Every (level, segment) row, level by level, until a level has a single segment."""
    rows, l = [], 0
    while True:
        count = math.ceil(n / 2**l)
        rows += [(l, m) for m in range(count)]
        if count == 1:
            return rows
        l += 1


def pooled(x, rows):
    n = x.shape[-2]
    return torch.stack([x[..., m * 2**l:min((m + 1) * 2**l, n), :].mean(-2) for l, m in rows], dim=-2)


def ms_attention(q, k, v, windows, causal):
    B, H, n, d = q.shape
    rows = levels(n)
    index = {r: j for j, r in enumerate(rows)}
    sizes = torch.tensor([min((m + 1) * 2**l, n) - m * 2**l for l, m in rows], dtype=q.dtype)
    kp, vp = pooled(k, rows), pooled(v, rows)
    # Heads split into len(windows) consecutive groups as evenly as possible (numpy's array_split:
    # the first H mod S groups get one head more); a window without a head is an error.
    S = len(windows)
    assert H >= S, f"{H} heads cannot cover {S} windows"
    sizes_per_group = [H // S + (1 if g < H % S else 0) for g in range(S)]
    starts = [sum(sizes_per_group[:g]) for g in range(S)]
    outs = []
    for g, w in enumerate(windows):
        mask = torch.zeros(n, len(rows), dtype=torch.bool)
        for i in range(n):
            seen = causal_segments(i, w) if causal else bidirectional_segments(i, n, w)
            for r in seen:
                mask[i, index[r]] = True
        h = slice(starts[g], starts[g] + sizes_per_group[g])
        scores = q[:, h] @ kp[:, h].transpose(-2, -1) / math.sqrt(d) + sizes.log()
        p = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        outs.append(p @ vp[:, h])
    return torch.cat(outs, dim=1)


def dense_attention(q, k, v, causal):
    n, d = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


CASES = [
    # name, causal, B, NH, T, HS, windows ([] = dense)
    ("n1_causal", True, 1, 1, 1, 3, [4]),
    ("n2_bidir", False, 1, 2, 2, 3, [1, 3]),
    ("n13_causal", True, 2, 4, 13, 5, [2, 3]),
    ("n13_bidir", False, 2, 4, 13, 5, [2, 3]),
    ("n37_causal", True, 1, 2, 37, 4, [8]),
    ("n37_bidir", False, 1, 2, 37, 4, [1, 5]),
    ("n100_causal", True, 1, 2, 100, 4, [8, 16]),
    ("n100_bidir", False, 1, 2, 100, 4, [7, 16]),
    ("dense_causal", True, 2, 2, 9, 4, []),
    ("dense_bidir", False, 2, 2, 9, 4, []),
    # Head counts that do not divide the number of windows (groups of 2, 1, 1 and 3, 2).
    ("h4_w3_causal", True, 2, 4, 37, 4, [2, 4, 8]),
    ("h4_w3_bidir", False, 1, 4, 37, 4, [2, 4, 8]),
    ("h5_w2_causal", True, 1, 5, 29, 3, [2, 5]),
    ("h5_w2_bidir", False, 2, 5, 29, 3, [3, 6]),
]


def main():
    torch.manual_seed(0)
    out = {}
    for name, causal, B, H, n, d, windows in CASES:
        q, k, v = (torch.randn(B, H, n, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
        dout = torch.randn(B, H, n, d, dtype=torch.float64)
        y = ms_attention(q, k, v, windows, causal) if windows else dense_attention(q, k, v, causal)
        dq, dk, dv = torch.autograd.grad(y, (q, k, v), dout)
        meta = [int(causal), B, H, n, d] + windows
        for key, t in [("q", q), ("k", k), ("v", v), ("dout", dout), ("out", y), ("dq", dq), ("dk", dk), ("dv", dv)]:
            out[f"{name}/{key}"] = t.detach().clone()
        out[f"{name}/meta"] = torch.tensor(meta, dtype=torch.int64)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ms_attention.pt")
    torch.save(out, path)
    print(f"wrote {path} ({len(CASES)} cases)")


if __name__ == "__main__":
    main()
