#!/usr/bin/env bash
# Quality benchmark (not a test): the default byte-level GPT (4 layers, d_model 256, 4 heads) at
# seq_len 1024 on Moby Dick, trained the same number of steps with the same seed three ways: dense
# attention (kernel "auto": CausalSelfAttention), dense through the fused flash-style CPU kernel,
# and multi-scale attention (windows 8,16,32,64: one head each). Prints each run's final validation
# loss (and bits/byte) and median training tokens/s, and the ratios against dense.
#   BUILD_DIR=/work/main/build STEPS=300 BATCH=8 bench/attention_quality.sh
# BUILD_DIR defaults to ./build; XTRAIN=<binary> uses an already built program.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
STEPS=${STEPS:-300}
BATCH=${BATCH:-8}
WINDOWS=${WINDOWS:-"[8,16,32,64]"}
if [[ -z "${XTRAIN:-}" ]]; then
  ninja -C "$BUILD_DIR" -j2 xtrain >&2
  XTRAIN=$BUILD_DIR/xtrain
fi
RUNS=$(mktemp -d)
trap 'rm -rf "$RUNS"' EXIT

echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  steps: $STEPS  batch: $BATCH x 1024"
common=(--set xtrain.model.seq_len=1024 --set xtrain.steps="$STEPS" --set train_micro_batch_size_per_gpu="$BATCH"
        --set xtrain.eval_interval="$STEPS" --set xtrain.eval_batches=20 --set xtrain.save_interval=0
        --set xtrain.seed=1234)
declare -A EXTRA=(
  [dense]=""
  [dense_flash]="--set xtrain.model.attention.kernel=dense_flash_cpu"
  [multiscale]="--set xtrain.model.attention.type=multiscale --set xtrain.model.attention.windows=$WINDOWS"
)
for name in dense dense_flash multiscale; do
  echo "# training $name" >&2
  # shellcheck disable=SC2086
  "$XTRAIN" train -o "$RUNS/$name" "${common[@]}" ${EXTRA[$name]} > "$RUNS/$name.log" 2>&1 ||
    { tail -20 "$RUNS/$name.log"; exit 1; }
done

/usr/bin/python3 - "$RUNS" <<'PY'
import json, math, statistics, sys, os
rows = {}
for name in ["dense", "dense_flash", "multiscale"]:
    val, tps = None, []
    for line in open(os.path.join(sys.argv[1], name, "metrics.jsonl")):
        m = json.loads(line)
        if "val/loss" in m:
            val = m["val/loss"]
        if "train/tokens_per_s" in m:
            tps.append(m["train/tokens_per_s"])
    rows[name] = (val, statistics.median(tps) if tps else float("nan"))
print(f"{'attention':<12} {'val loss':>9} {'bits/byte':>10} {'tokens/s':>10} {'loss vs dense':>14} {'speed vs dense':>15}")
d_loss, d_tps = rows["dense"]
for name, (loss, tps) in rows.items():
    print(f"{name:<12} {loss:9.4f} {loss / math.log(2):10.4f} {tps:10.1f} {loss - d_loss:+14.4f} {tps / d_tps:14.2f}x")
PY
