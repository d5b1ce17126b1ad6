#!/usr/bin/env bash
# L-BFGS against AdamW on the logistic-regression example (configs/logistic_breast_cancer.json:
# the Wisconsin breast cancer table, 455 training rows x 30 standardised features, full batch):
# wall time and steps to reach the same training loss. Both runs minimise the same
# objective (mean cross-entropy, no weight decay) from the same zero start on the same batch. The
# target is the best training loss AdamW reaches in its steps (+0.1%); each optimizer's time is the
# summed duration of its steps before the first step whose logged loss (the loss at its start) is at
# or below it (each step's duration from metrics.jsonl: its samples / train/samples_per_s). Prints
# both rows, the ratio, and each run's final validation accuracy and AUC.
#
# usage: bench/lbfgs_vs_adamw.sh [ADAMW_STEPS (default 300)] [ADAMW_LR (default 0.05)] [LBFGS_STEPS (default 10)]
# env: XTRAIN (default build/xtrain), OUT (default a temp folder), THREADS (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
XTRAIN=${XTRAIN:-build/xtrain}
ADAMW_STEPS=${1:-300}
ADAMW_LR=${2:-0.05}
LBFGS_STEPS=${3:-10}
OUT=${OUT:-$(mktemp -d /tmp/lbfgs_vs_adamw.XXXX)}
THREADS=${THREADS:-2}
DATA=${XTRAIN_DATA_DIR:-$HOME/.cache/xtrain/data}/breast_cancer/breast_cancer.csv
[ -f "$DATA" ] || { echo "no $DATA: run scripts/fetch-data" >&2; exit 2; }
unset XTRAIN_SMOKE
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  AdamW $ADAMW_STEPS steps lr $ADAMW_LR, L-BFGS $LBFGS_STEPS steps"

/usr/bin/python3 - "$ADAMW_LR" "$OUT/adamw.json" <<'PY'
import json, sys
cfg = json.load(open("configs/logistic_breast_cancer.json"))
cfg["optimizer"] = {"type": "AdamW", "params": {"lr": float(sys.argv[1]), "weight_decay": 0.0}}
json.dump(cfg, open(sys.argv[2], "w"), indent=1)
PY

common=(--set "xtrain.threads=$THREADS" --set xtrain.save_interval=0 --set xtrain.eval_interval=0)
run() {  # name config steps
  "$XTRAIN" train --config "$2" "${common[@]}" --set "xtrain.steps=$3" --output "$OUT/$1" > "$OUT/$1.log" 2>&1 ||
    { tail -20 "$OUT/$1.log" >&2; exit 1; }
}
run lbfgs configs/logistic_breast_cancer.json "$LBFGS_STEPS"
run adamw "$OUT/adamw.json" "$ADAMW_STEPS"

/usr/bin/python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]

# (step, loss at the step's start, seconds of the steps before it): a step's time is its samples over
# its train/samples_per_s, so evaluation and logging between steps are not counted for either.
def read(name):
    recs = [json.loads(l) for l in open(os.path.join(out, name, "metrics.jsonl")) if l.strip()]
    train = sorted((r for r in recs if "train/loss" in r), key=lambda r: r["step"])
    loss, before, samples = [], 0.0, 0.0
    for r in train:
        loss.append((r["step"], r["train/loss"], before))
        before += (r["train/samples"] - samples) / r["train/samples_per_s"]
        samples = r["train/samples"]
    final = {k: v for r in recs for k, v in r.items() if k in ("val/accuracy", "val/auc")}
    return loss, final

lbfgs, lbfgs_final = read("lbfgs")
adamw, adamw_final = read("adamw")
best_adamw = min(l for _, l, _ in adamw)
target = best_adamw * 1.001
if min(l for _, l, _ in lbfgs) > target:
    sys.exit("L-BFGS never reached AdamW's best loss %.6f: raise LBFGS_STEPS" % best_adamw)

def reached(rows):
    for step, loss, t in rows:
        if loss <= target:
            return step, loss, t
    return None

print("target: train loss <= %.6f (AdamW's best %.6f + 0.1%%)" % (target, best_adamw))
print("%-7s %6s %10s %14s %10s %8s" % ("", "steps", "seconds", "final loss", "val acc", "val AUC"))
rows = {}
for name, data, final in (("L-BFGS", lbfgs, lbfgs_final), ("AdamW", adamw, adamw_final)):
    step, loss, t = reached(data)
    rows[name] = t
    print("%-7s %6d %10.3f %14.6f %10s %8s" % (name, step - 1, t, data[-1][1],
          "%.4f" % final.get("val/accuracy", float("nan")), "%.4f" % final.get("val/auc", float("nan"))))
print("AdamW / L-BFGS time to the target: %.1fx" % (rows["AdamW"] / max(rows["L-BFGS"], 1e-9)))
PY
echo "# runs in $OUT"
