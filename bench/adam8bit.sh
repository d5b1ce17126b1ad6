#!/usr/bin/env bash
# 8-bit optimizer state (optimizer.params.state_dtype "int8") against fp32 state. Not a test.
#  1. The optimizer step alone (bench/adam8bit_step.cpp): median step time of the 8-bit step and of
#     our fused fp32 AdamW on the same buffers, and the optimizer-state bytes per parameter.
#  2. Training: the default recipe (configs/default.json, fp32 compute as recorded; STEPS steps, default 600) with fp32
#     and with 8-bit state, then a fine-tune of FT_STEPS steps (lr FT_LR) from the fp32 run's weights
#     (xtrain.model.init_from: fresh optimizer state) with each: validation losses and their ratios.
#   XTRAIN=build/xtrain bench/adam8bit.sh            # SIZES=10000000,50000000 STEPS=600 FT_STEPS=200
# SKIP_TRAIN=1 runs part 1 only; SKIP_STEP=1 part 2 only. EXTRA: more --set arguments for every run.
# PARALLEL=1: the fp32 and int8 run of each pair at the same time, one thread each (OMP_NUM_THREADS=1,
# xtrain.threads=1): half the wall time on 2 cores, and both runs see the same machine load.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
XTRAIN=${XTRAIN:-$ROOT/build/xtrain}
BENCH_BIN=${BENCH_BIN:-$(dirname "$XTRAIN")/bench/bench_adam8bit_step}
OUT=${OUT:-/tmp/xtrain-adam8bit}
STEPS=${STEPS:-600}
FT_STEPS=${FT_STEPS:-200}
FT_LR=${FT_LR:-3e-4}
read -r -a extra_sets <<<"${EXTRA:-}"
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)"

if [[ -z "${SKIP_STEP:-}" ]]; then
  "$BENCH_BIN" --sizes "${SIZES:-10000000,50000000}" --threads "${THREADS:-2,1}" --reps "${REPS:-9}"
fi
[[ -n "${SKIP_TRAIN:-}" ]] && exit 0

val_loss() {  # the last validation loss of a run
  python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if 'val/loss' in l][-1]['val/loss'])" \
    "$1/metrics.jsonl"
}
run() {  # name, state dtype, steps, more --set arguments...
  local name=$1 dtype=$2 steps=$3
  shift 3
  rm -rf "${OUT:?}/$name"
  local start
  start=$(date +%s)
  "$XTRAIN" train --set xtrain.steps="$steps" --set optimizer.params.state_dtype="$dtype" \
    --set xtrain.generate.tokens=0 --set xtrain.save_interval="$steps" --set bf16.enabled=false "$@" "${thread_sets[@]}" "${extra_sets[@]}" \
    --output "$OUT/$name" >"$OUT/$name.log" 2>&1
  echo "$name $(val_loss "$OUT/$name") $(($(date +%s) - start))" >"$OUT/$name.row"
}
pair() {  # prefix, steps, more --set arguments...: the fp32 and the int8 run
  local prefix=$1 steps=$2
  shift 2
  if [[ -n "${PARALLEL:-}" ]]; then
    run "${prefix}_fp32" fp32 "$steps" "$@" &
    local fp32=$!
    run "${prefix}_int8" int8 "$steps" "$@"
    wait "$fp32"
  else
    run "${prefix}_fp32" fp32 "$steps" "$@"
    run "${prefix}_int8" int8 "$steps" "$@"
  fi
}
thread_sets=()
if [[ -n "${PARALLEL:-}" ]]; then
  export OMP_NUM_THREADS=1
  thread_sets=(--set xtrain.threads=1)
fi

echo "run state_dtype steps val_loss seconds"
pair base "$STEPS"
ft_sets=(--set xtrain.model.init_from="$OUT/base_fp32" --set optimizer.params.lr="$FT_LR"
  --set scheduler.params.warmup_num_steps=20)
pair ft "$FT_STEPS" "${ft_sets[@]}"
base32=$(cat "$OUT/base_fp32.row") base8=$(cat "$OUT/base_int8.row")
ft32=$(cat "$OUT/ft_fp32.row") ft8=$(cat "$OUT/ft_int8.row")
python3 - "$base32" "$base8" "$ft32" "$ft8" "$STEPS" "$FT_STEPS" <<'EOF'
import sys
rows = [r.split() for r in sys.argv[1:5]]
steps, ft_steps = sys.argv[5], sys.argv[6]
print("| run | state | steps | val loss | 8-bit / fp32 | seconds |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for i, (name, loss, secs) in enumerate(rows):
    base = float(rows[i - i % 2][1])
    kind = "default recipe" if i < 2 else "fine-tune from base_fp32"
    print(f"| {kind} | {'fp32' if i % 2 == 0 else 'int8'} | {steps if i < 2 else ft_steps} | {float(loss):.4f} | "
          f"{float(loss) / base:.4f} | {secs} |")
EOF
