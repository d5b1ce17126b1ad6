#!/usr/bin/env python3
"""Executable form of the key-selection rule in multiscale-attention-2d.md.

For each patch (r, c) of an h x w_grid grid it lists, per level l, the pooled 2^l x 2^l blocks the
query sees, and checks that together they cover every patch of the grid exactly once. It also
prints the largest number of keys one query sees, to check the cost claim.
"""
import sys


def down(x, a):
    return (x // a) * a


def up(x, a):
    return -((-x) // a) * a


def axis_ranges(i, n, w, levels):
    """[s(l), f(l)) for l = 0 .. levels-1 on one axis: the 1-D bidirectional rule, held at [0, n)
    once it gets there."""
    s = max(0, down(i - w // 2, 2))
    f = min(n, up(i + 1 + (w + 1) // 2, 2))
    out = [(s, f)]
    for l in range(1, levels):
        s = max(0, down(s - (w // 2) * 2**l, 2 ** (l + 1)))
        f = min(n, up(f + (w // 2) * 2**l, 2 ** (l + 1)))
        out.append((s, f))
    return out


def blocks(r, c, h, wg, w):
    """Level-l blocks (l, a, b) the query at patch (r, c) sees: block (a, b) of level l covers rows
    [a 2^l, (a+1) 2^l) and columns [b 2^l, (b+1) 2^l), cut at the grid's edge."""
    levels = 1
    while True:
        rows, cols = axis_ranges(r, h, w, levels), axis_ranges(c, wg, w, levels)
        if rows[-1] == (0, h) and cols[-1] == (0, wg):
            break
        levels += 1
    seen = []
    for l in range(levels):
        z = 2**l
        (rs, rf), (cs, cf) = rows[l], cols[l]
        for a in range(rs // z, up(rf, z) // z):
            for b in range(cs // z, up(cf, z) // z):
                if l > 0:
                    (prs, prf), (pcs, pcf) = rows[l - 1], cols[l - 1]
                    if prs <= a * z and min((a + 1) * z, h) <= prf and pcs <= b * z and min((b + 1) * z, wg) <= pcf:
                        continue  # inside the previous level's rectangle: seen finer there
                seen.append((l, a, b))
    return seen


def covered(seen, h, wg):
    out = []
    for l, a, b in seen:
        z = 2**l
        out += [(y, x) for y in range(a * z, min((a + 1) * z, h)) for x in range(b * z, min((b + 1) * z, wg))]
    return sorted(out)


if __name__ == "__main__":
    grids = [(1, 1), (1, 5), (2, 3), (4, 4), (7, 7), (7, 9), (14, 14), (16, 16), (28, 28)]
    for h, wg in grids:
        everything = sorted((y, x) for y in range(h) for x in range(wg))
        for w in [1, 2, 3, 4, 8]:
            most = 0
            for r in range(h):
                for c in range(wg):
                    seen = blocks(r, c, h, wg, w)
                    if covered(seen, h, wg) != everything:
                        sys.exit(f"not a partition: grid {h}x{wg} window {w} query ({r},{c})")
                    most = max(most, len(seen))
            print(f"grid {h:2d}x{wg:2d} window {w}: most keys a query sees {most:4d} of {h * wg}")
    print("all partitions exact")
