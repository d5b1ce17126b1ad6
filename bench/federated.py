#!/usr/bin/env python3
"""Table and plot for bench/federated.sh: validation accuracy against rounds per variant (from each
variant's metrics.jsonl), bytes and wall time; writes OUT/federated.svg.
usage: federated.py OUT VARIANT..."""
import json
import os
import sys

out, variants = sys.argv[1], sys.argv[2:]
curves, summary = {}, {}
for v in variants:
    rows = [json.loads(l) for l in open(os.path.join(out, v, "metrics.jsonl"))]
    curves[v] = [(r["round"], 100 * r["val_accuracy"]) for r in rows]
    summary[v] = json.load(open(os.path.join(out, v, "summary.json")))
    summary[v]["wall"] = float(open(os.path.join(out, v + ".time")).read().split()[-1])
rounds = max(len(c) for c in curves.values())
marks = sorted({max(1, rounds // 6), rounds // 3, rounds // 2, (2 * rounds) // 3, rounds} - {0})
print("| variant | " + " | ".join("acc @%d" % m for m in marks) + " | up MB | down MB | wall s |")
print("|---|" + "---|" * (len(marks) + 3))
for v in variants:
    acc = dict(curves[v])
    s = summary[v]
    print("| %s | " % v + " | ".join("%.1f" % acc[m] if m in acc else "-" for m in marks) +
          " | %.0f | %.0f | %.0f |" % (s["bytes_up"] / 1e6, s["bytes_down"] / 1e6, s["wall"]))

W, H, M = 720, 440, 50
lo = min(a for c in curves.values() for _, a in c)
lo = max(0.0, 10 * (int(lo) // 10))
X = lambda r: M + (W - 2 * M) * (r - 1) / max(1, rounds - 1)
Y = lambda a: H - M - (H - 2 * M) * (a - lo) / (100 - lo)
colors = ["#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#7f7f7f", "#e377c2"]
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
       '<rect width="100%" height="100%" fill="white"/>',
       '<text x="%d" y="20">Fashion-MNIST MLP, federated: validation accuracy (%%) against rounds</text>' % M]
for a in range(int(lo), 101, 10):
    svg += ['<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (M, W - M, Y(a), Y(a)),
            '<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (M - 5, Y(a) + 4, a)]
for r in sorted(set([1] + marks)):
    svg.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (X(r), H - M + 16, r))
svg.append('<text x="%d" y="%d" text-anchor="middle">round</text>' % (W // 2, H - 12))
for i, v in enumerate(variants):
    c = colors[i % len(colors)]
    dash = ' stroke-dasharray="6,4"' if v.startswith("prox") else ""
    pts = " ".join("%.1f,%.1f" % (X(r), Y(a)) for r, a in curves[v])
    svg.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' % (c, dash, pts))
    svg.append('<text x="%d" y="%d" fill="%s">%s</text>' % (W - M - 110, H - M - 20 - 16 * (len(variants) - 1 - i), c, v))
svg.append("</svg>")
open(os.path.join(out, "federated.svg"), "w").write("\n".join(svg))
print("plot:", os.path.join(out, "federated.svg"))
