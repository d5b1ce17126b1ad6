#!/usr/bin/env bash
# Activation checkpointing benchmark (issue 10): peak resident memory (memory/peak_rss_mb of the
# process, from metrics.jsonl) and training speed (train/tokens_per_s, median over the steps after
# the first two) of the default GPT (configs/gpt_small.json: 4 layers, d 256) at a long sequence,
# T=1024, micro-batch 4, without checkpointing, with every block checkpointed, and with
# number_checkpoints = half the layers. Each variant is its own process, so its peak RSS is its own.
# Not a test.
#   BUILD_DIR=/tmp/build-delt bench/activation_checkpointing.sh      # ~3 minutes on 2 busy cores
#   STEPS=8 T=1024 B=4 bench/activation_checkpointing.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
XT=$BUILD_DIR/xtrain
STEPS=${STEPS:-8}
T=${T:-1024}
B=${B:-4}
LAYERS=4
OUT=${OUT:-$(mktemp -d /tmp/xtrain-ac.XXXX)}
PY=/usr/bin/python3
rm -rf "$OUT" && mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  T=$T B=$B steps=$STEPS"

common=(--config "$ROOT/configs/gpt_small.json" --set gradient_accumulation_steps=1
        --set train_micro_batch_size_per_gpu=$B --set xtrain.model.seq_len=$T --set xtrain.model.layers=$LAYERS
        --set xtrain.steps=$STEPS --set xtrain.eval_interval=0 --set xtrain.eval_batches=1
        --set xtrain.save_interval=0 --set xtrain.generate.tokens=0 --set xtrain.log_interval=1)
declare -A EXTRA=(
  [off]=""
  [all]="--set activation_checkpointing.enabled=true"
  [half]="--set activation_checkpointing.enabled=true --set activation_checkpointing.number_checkpoints=$((LAYERS / 2))"
)
for v in off all half; do
  echo "# $(date -u +%T) $v (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  # shellcheck disable=SC2086
  "$XT" train "${common[@]}" ${EXTRA[$v]} --output "$OUT/$v" >"$OUT/$v.log" 2>&1 ||
    { tail -20 "$OUT/$v.log" >&2; exit 1; }
done

$PY - "$OUT" <<'EOF2'
import json, os, statistics, sys
out = sys.argv[1]
rows = {}
for v in ["off", "all", "half"]:
    recs = [json.loads(l) for l in open(os.path.join(out, v, "metrics.jsonl"))]
    recs = [r for r in recs if "train/tokens_per_s" in r]
    rate = statistics.median(r["train/tokens_per_s"] for r in recs[2:])
    rows[v] = (max(r["memory/peak_rss_mb"] for r in recs), rate)
print(f"{'checkpointing':<28}{'peak RSS MiB':>14}{'vs off':>8}{'tokens/s':>10}{'vs off':>8}")
names = {"off": "off", "all": "every block (4 of 4)", "half": "number_checkpoints=2 of 4"}
for v, (mem, rate) in rows.items():
    print(f"{names[v]:<28}{mem:14.0f}{mem / rows['off'][0]:8.2f}{rate:10.0f}{rate / rows['off'][1]:8.2f}")
EOF2
echo "runs in $OUT"
