#!/usr/bin/env bash
# Data-parallel scaling on this machine with the default GPT (configs/default.json, micro-batch 16):
# 2 ranks x 1 thread (global batch 32) against 1 rank x 1 thread on half that global batch (16), so
# each rank does the same work and perfect scaling doubles tokens/s. Efficiency = tokens/s(2 ranks)
# / (2 x tokens/s(1 rank)); goal >= 90%. A third run with zero_optimization.overlap_comm=false gives
# the share of communication hidden by overlap: 1 - (t_on - t_1) / (t_off - t_1) per step.
# Throughput comes from metrics.jsonl timestamps between the first and last logged steps (start-up,
# evaluation and the final checkpoint are outside that window). Runs are interleaved, repeated, and
# medians reported. Needs the engine integration of issue 4 (xtrain train under xtrain launch).
#   BUILD_DIR=build STEPS=40 REPS=3 bench/dp_scaling.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
STEPS=${STEPS:-40}
REPS=${REPS:-3}
XTRAIN=$BUILD_DIR/xtrain
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

common=(--config "$ROOT/configs/default.json" --set bf16.enabled=false --set "xtrain.steps=$STEPS" --set xtrain.log_interval=5
        --set xtrain.eval_interval=1000000 --set xtrain.save_interval=1000000 --set xtrain.threads=1)
run_one() { OMP_NUM_THREADS=1 "$XTRAIN" train "${common[@]}" --output "$1" >"$1.log" 2>&1; }
run_two() {  # $1 run dir, $2 overlap true|false
  OMP_NUM_THREADS=1 "$XTRAIN" launch --nproc-per-node 2 --master-port $((29600 + RANDOM % 300)) -- train "${common[@]}" \
    --set "zero_optimization.overlap_comm=$2" --output "$1" >"$1.log" 2>&1
}

echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  steps: $STEPS  reps: $REPS"
for rep in $(seq "$REPS"); do
  echo "# rep $rep (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  run_one "$TMP/one-$rep" || { cat "$TMP/one-$rep.log"; exit 1; }
  run_two "$TMP/on-$rep" true || { cat "$TMP/on-$rep.log"; exit 1; }
  run_two "$TMP/off-$rep" false || { cat "$TMP/off-$rep.log"; exit 1; }
done

$PY - "$TMP" "$REPS" <<'PYEOF'
import json, os, statistics, sys
tmp, reps = sys.argv[1], int(sys.argv[2])

def measure(run):
    cfg = json.load(open(os.path.join(run, "config.json")))
    tokens_per_step = cfg["train_batch_size"] * cfg["xtrain"]["model"]["seq_len"]
    rows = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    rows = [r for r in rows if "train/loss" in r]
    a, b = rows[0], rows[-1]  # the first logged step is the warm-up boundary
    seconds = b["time"] - a["time"]
    steps = b["step"] - a["step"]
    return cfg["train_batch_size"], steps * tokens_per_step / seconds, seconds / steps

res = {k: [measure(os.path.join(tmp, f"{k}-{r}")) for r in range(1, reps + 1)] for k in ("one", "on", "off")}
if res["on"][0][0] != 2 * res["one"][0][0]:
    sys.exit("the 2-rank run trained with train_batch_size %d, not %d: xtrain train is not data-parallel yet "
             "(engine integration of issue 4 missing)" % (res["on"][0][0], 2 * res["one"][0][0]))
med = {k: (statistics.median(x[1] for x in v), statistics.median(x[2] for x in v)) for k, v in res.items()}
eff = med["on"][0] / (2 * med["one"][0])
t1, ton, toff = med["one"][1], med["on"][1], med["off"][1]
hidden = 1 - (ton - t1) / (toff - t1) if toff > t1 else float("nan")
print("%-34s %12s %10s" % ("run", "tokens/s", "ms/step"))
print("%-34s %12.0f %10.1f" % ("1 rank x 1 thread, batch 16", med["one"][0], t1 * 1e3))
print("%-34s %12.0f %10.1f" % ("2 ranks x 1 thread, overlap on", med["on"][0], ton * 1e3))
print("%-34s %12.0f %10.1f" % ("2 ranks x 1 thread, overlap off", med["off"][0], toff * 1e3))
print("scaling efficiency (overlap on): %.1f%%   goal >= 90%%: %s" % (100 * eff, "met" if eff >= 0.9 else "NOT met"))
print("communication hidden by overlap: %.0f%% (exposed %.1f ms/step with overlap off, %.1f ms with it on)"
      % (100 * hidden, (toff - t1) * 1e3, (ton - t1) * 1e3))
PYEOF
