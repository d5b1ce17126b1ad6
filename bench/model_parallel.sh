#!/usr/bin/env bash
# Data, tensor and pipeline parallelism side by side on 2 ranks (issue 10): the default GPT
# (configs/gpt_small.json: 4 layers, d 256, T 256) with the same global batch (16 sequences a step)
# as DP 2, TP 2 and PP 2 (1F1B, 8 micro-batches), each with ZeRO stage 0. Reports the median
# tokens/s after the first two steps, the peak resident memory of rank 0 and the model-state bytes
# per rank, each as a ratio to DP. On one machine TP and PP pay for communication that DP avoids;
# what they buy is memory per rank (the model split in two). Not a test.
#   bench/model_parallel.sh                # ~3 minutes on 2 idle cores
#   STEPS=10 bench/model_parallel.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
XT=$BUILD_DIR/xtrain
STEPS=${STEPS:-10}
OUT=${OUT:-$(mktemp -d /tmp/xtrain-mp.XXXX)}
PY=/usr/bin/python3
rm -rf "$OUT" && mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  steps=$STEPS"

common=(--config "$ROOT/configs/gpt_small.json" --set xtrain.model.dropout=0 --set train_batch_size=16 --set gradient_accumulation_steps=auto
        --set xtrain.steps=$STEPS --set xtrain.eval_interval=0 --set xtrain.eval_batches=1
        --set xtrain.save_interval=-1 --set xtrain.generate.tokens=0 --set xtrain.log_interval=1
        --set steps_per_print=100 --set memory_breakdown=true)
declare -A EXTRA=(
  [dp]="--set train_micro_batch_size_per_gpu=8"
  [tp]="--set train_micro_batch_size_per_gpu=8 --set tensor_parallel.size=2"
  [pp]="--set train_micro_batch_size_per_gpu=2 --set pipeline.stages=2 --set pipeline.schedule=1f1b"
)
for v in dp tp pp; do
  echo "# $(date -u +%T) $v (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  # shellcheck disable=SC2086
  "$XT" launch -N 2 -- train "${common[@]}" ${EXTRA[$v]} --output "$OUT/$v" >"$OUT/$v.log" 2>&1 ||
    { tail -20 "$OUT/$v.log" >&2; exit 1; }
done

$PY - "$OUT" <<'EOF2'
import json, os, statistics, sys
out = sys.argv[1]
rows = {}
for v in ["dp", "tp", "pp"]:
    recs = [json.loads(l) for l in open(os.path.join(out, v, "metrics.jsonl"))]
    recs = [r for r in recs if "train/tokens_per_s" in r]
    rate = statistics.median(r["train/tokens_per_s"] for r in recs[2:])
    states = sum(recs[-1].get(f"memory/{k}_mb", 0) for k in ("params", "master", "grads", "optimizer"))
    rows[v] = (rate, max(r.get("memory/peak_rss_mb", 0) for r in recs), states, recs[-1]["train/loss"])
print(f"{'layout (2 ranks)':<24}{'tokens/s':>10}{'vs DP':>7}{'peak RSS MiB':>14}{'vs DP':>7}{'states MiB':>12}{'vs DP':>7}{'loss':>8}")
names = {"dp": "DP 2", "tp": "TP 2", "pp": "PP 2 (1F1B, m=8)"}
d = rows["dp"]
for v, (rate, rss, states, loss) in rows.items():
    print(f"{names[v]:<24}{rate:10.0f}{rate / d[0]:7.2f}{rss:14.0f}{rss / d[1]:7.2f}{states:12.1f}{states / d[2]:7.2f}{loss:8.3f}")
EOF2
echo "runs in $OUT"
