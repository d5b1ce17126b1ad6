#!/usr/bin/env python3
"""Summaries for bench/nas.sh.

  nas.py best GP_STUDY RANDOM_STUDY   the --set words of the better study's best trial
  nas.py report OUT TRIALS            best val loss after each quarter of the trials per sampler,
                                      the Pareto fronts' sizes, and best vs default at equal time
"""
import json
import os
import sys


def study_best(study):
    with open(os.path.join(study, "best_params.json")) as f:
        return json.load(f)


def convergence(study):
    with open(os.path.join(study, "convergence.jsonl")) as f:
        return [json.loads(line) for line in f]


def last_eval(run_dir):
    """(steps, val loss) of the run's final evaluation in metrics.jsonl."""
    steps, loss = None, None
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if "val/loss" in row:
                steps, loss = row["step"], row["val/loss"]
    return steps, loss


def params_of(log):
    with open(log) as f:
        for line in f:
            if " parameters" in line and "model:" in line:
                return int(line.split(" with ")[1].split()[0])
    return None


def main():
    if sys.argv[1] == "best":
        a, b = study_best(sys.argv[2]), study_best(sys.argv[3])
        best = a if a["value"] <= b["value"] else b
        print(" ".join("--set " + o for o in best["overrides"] if o.startswith("xtrain.model.")))
        return
    out, trials = sys.argv[2], int(sys.argv[3])
    marks = sorted({max(1, trials * q // 4) for q in (1, 2, 3, 4)})
    print("best val loss after N trials (same seed, same per-trial training time):")
    print("%-8s" % "sampler" + "".join("%10s" % ("N=%d" % n) for n in marks))
    bests = {}
    for s in ("gp", "random"):
        rows = convergence(os.path.join(out, s))
        vals = [rows[min(n, len(rows)) - 1]["best"] for n in marks]
        bests[s] = vals
        print("%-8s" % s + "".join("%10.4f" % v if v is not None else "%10s" % "-" for v in vals))
    print("%-8s" % "gp/rand" + "".join("%10.3f" % (g / r) if g and r else "%10s" % "-"
                                       for g, r in zip(bests["gp"], bests["random"])))
    for s in ("gp", "random"):
        with open(os.path.join(out, s, "pareto.json")) as f:
            front = json.load(f)["front"]
        print("%s Pareto front: %d trials: %s" % (s, len(front), ", ".join(
            "%.4f @ %.3g" % (p["value"], p["objective2"]) for p in front)))
    print("at equal training time:")
    print("%-10s %8s %8s %10s" % ("model", "steps", "val_loss", "params"))
    res = {}
    for name in ("best", "default"):
        steps, loss = last_eval(os.path.join(out, "final-" + name))
        res[name] = loss
        print("%-10s %8s %8.4f %10s" % (name, steps, loss, params_of(os.path.join(out, "final-%s.log" % name))))
    print("best/default val loss: %.3f" % (res["best"] / res["default"]))


if __name__ == "__main__":
    main()
