#!/usr/bin/env python3
"""The report of bench/default_run_quality.sh: reads OUT/xtrain (metrics.jsonl, the launch time in
OUT/xtrain.start), OUT/peer.jsonl and OUT/xtrain_score.json; prints both validation curves against
wall time, the validation each side had reached at the budget (the last validation at or before it),
the time each took to reach the target and their ratio, and both final models' full-split scores
from the one evaluator; writes OUT/default_run.svg.

  /usr/bin/python3 bench/default_run_quality.py OUT [BUDGET_S] [TARGET]
"""
import json
import os
import sys


def xtrain_curve(out):
    start = float(open(os.path.join(out, "xtrain.start")).read())
    curve = []
    for line in open(os.path.join(out, "xtrain", "metrics.jsonl")):
        r = json.loads(line)
        if "val/loss" in r:
            curve.append((r["time"] - start, r["step"], r["val/loss"]))
    return curve


def peer_curve(out):
    rows = [json.loads(l) for l in open(os.path.join(out, "peer.jsonl")) if l.strip()]
    head = rows[0]
    curve = [(r["t"], r["step"], r["val"]) for r in rows if "val" in r]
    final = next(r for r in rows if r.get("final"))
    return head, curve, final


def at_budget(curve, budget):
    before = [c for c in curve if c[0] <= budget]
    return before[-1] if before else None


def time_to(curve, target):
    """Linear interpolation between the validations around the first one at or below target."""
    prev = None
    for t, step, v in curve:
        if v <= target:
            if prev is None or prev[2] == v:
                return t
            (t0, _, v0) = prev
            return t0 + (t - t0) * (v0 - target) / (v0 - v)
        prev = (t, step, v)
    return None


def svg(curves, budget, target, path):
    W, H, M = 640, 400, 56
    tmax = max(budget, max(c[-1][0] for c in curves.values())) * 1.02
    vals = [v for c in curves.values() for _, _, v in c]
    vmin, vmax = min(min(vals), target) - 0.05, min(max(vals), 3.0)
    X = lambda t: M + (W - 2 * M) * t / tmax
    Y = lambda v: H - M - (H - 2 * M) * (min(v, vmax) - vmin) / (vmax - vmin)
    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
         % (W, H), '<rect width="100%" height="100%" fill="white"/>']
    v = round(vmin, 1)
    while v <= vmax:
        s.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>' % (M, W - M, Y(v), Y(v)))
        s.append('<text x="%d" y="%.1f" text-anchor="end">%.1f</text>' % (M - 6, Y(v) + 4, v))
        v = round(v + 0.2, 1)
    for t in range(0, int(tmax) + 1, 60):
        s.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (X(t), H - M + 16, t))
    s.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999" stroke-dasharray="4 3"/>'
             % (X(budget), X(budget), M, H - M))
    s.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/>'
             % (M, W - M, Y(target), Y(target)))
    s.append('<text x="%d" y="%.1f" fill="#666">%.2f</text>' % (W - M + 4, Y(target) + 4, target))
    s.append('<text x="%d" y="%d" text-anchor="middle">seconds since launch</text>' % (W // 2, H - 14))
    s.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">validation loss (nats/byte)'
             '</text>' % (H // 2, H // 2))
    for i, (name, c) in enumerate(curves.items()):
        color = ("#c0392b", "#2c3e50")[i % 2]
        s.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                 % (color, " ".join("%.1f,%.1f" % (X(t), Y(v)) for t, _, v in c)))
        s.append('<text x="%d" y="%d" fill="%s">%s</text>' % (W - M - 200, M + 16 + 16 * i, color, name))
    s.append("</svg>")
    open(path, "w").write("\n".join(s))


def main():
    out = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 300.0
    target = float(sys.argv[3]) if len(sys.argv) > 3 else 1.60
    xc = xtrain_curve(out)
    head, pc, pfinal = peer_curve(out)
    xscore = json.load(open(os.path.join(out, "xtrain_score.json")))["val_full"]
    print("peer: %s, %d steps planned (probe: %s s/step)" % (
        head["dtype"], head["planned_steps"], ", ".join("%s %.3f" % kv for kv in head["probe_step_s"].items())))
    print("\n%8s | %-22s | %-22s" % ("seconds", "xtrain (step: val)", "PyTorch (step: val)"))
    for lo in range(0, int(max(xc[-1][0], pc[-1][0])) + 30, 30):
        def cell(c):
            r = [x for x in c if lo <= x[0] < lo + 30]
            return "%5d: %.4f" % (r[-1][1], r[-1][2]) if r else ""
        print("%8d | %-22s | %-22s" % (lo, cell(xc), cell(pc)))
    xb, pb = at_budget(xc, budget), at_budget(pc, budget)
    print("\nat %.0f s: xtrain %.4f (step %d, %.0f s), PyTorch %.4f (step %d, %.0f s): PyTorch - xtrain = %+.4f nats/byte"
          % (budget, xb[2], xb[1], xb[0], pb[2], pb[1], pb[0], pb[2] - xb[2]))
    xt, pt = time_to(xc, target), time_to(pc, target)
    fmt = lambda t: "%.0f s" % t if t is not None else "not reached"
    ratio = " (PyTorch / xtrain = %.2fx)" % (pt / xt) if xt and pt else ""
    print("time to %.2f: xtrain %s, PyTorch %s%s" % (target, fmt(xt), fmt(pt), ratio))
    print("final models, one evaluator (fp32, every non-overlapping window of the validation text): "
          "xtrain %.4f after %d steps, PyTorch %.4f after %d steps" % (xscore, xc[-1][1], pfinal["val_full"],
                                                                     pfinal["step"]))
    print("goal: xtrain <= %.2f within %.0f s: %s; better than PyTorch at %.0f s: %s" % (
        target, budget, "met" if xt is not None and xt <= budget else "NOT met", budget,
        "yes" if xb[2] < pb[2] else "no"))
    svg({"xtrain train (default)": xc, "PyTorch (%s)" % head["dtype"]: pc}, budget, target,
        os.path.join(out, "default_run.svg"))
    print("plot:", os.path.join(out, "default_run.svg"))


if __name__ == "__main__":
    main()
