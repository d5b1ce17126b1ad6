#!/usr/bin/env bash
# ZeRO stages side by side: the same GPT trained by 2 ranks on this machine at stage 0, 1, 2, 3 and
# the offload variants given in VARIANTS; prints tokens/s relative to stage 0, rank 0's model-state
# MB (measured, and the ZeRO formula the engine logs at start) and peak RSS. Stage 0 is the peer.
#   XTRAIN=build/xtrain STEPS=12 LAYERS=8 DMODEL=512 REPS=2 bench/zero_stages.sh [OUT_DIR]
# VARIANTS: space-separated "name:--set,k=v,--set,k=v" entries; default: the four stages.
# REPS: rounds over all variants, interleaved so that slow phases of a noisy machine hit every
# variant; tokens/s is the mean over rounds (each round's figure in parentheses).
set -uo pipefail
XTRAIN=${XTRAIN:-build/xtrain}
STEPS=${STEPS:-12}
REPS=${REPS:-1}
LAYERS=${LAYERS:-8}
DMODEL=${DMODEL:-512}
HEADS=${HEADS:-8}
SEQ=${SEQ:-256}
MICRO=${MICRO:-4}
OUT=${1:-/tmp/xtrain-zero-stages}
NVME_DIR=${NVME_DIR:-$OUT/nvme}
VARIANTS=${VARIANTS:-"stage0:--set,zero_optimization.stage=0 stage1:--set,zero_optimization.stage=1 \
stage2:--set,zero_optimization.stage=2 stage3:--set,zero_optimization.stage=3"}
mkdir -p "$OUT" "$NVME_DIR"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  GPT L$LAYERS d$DMODEL h$HEADS T$SEQ micro $MICRO x accum 2 x dp 2, fp32 AdamW, $STEPS steps, $REPS rounds"
for rep in $(seq 1 "$REPS"); do
  for v in $VARIANTS; do
    name=${v%%:*}
    IFS=',' read -r -a extra <<<"${v#*:}"
    run="$OUT/$name-$rep"
    rm -rf "$run"
    "$XTRAIN" launch -N 2 -- train --config configs/gpt_small.json \
      --set xtrain.model.layers="$LAYERS" --set xtrain.model.d_model="$DMODEL" --set xtrain.model.heads="$HEADS" \
      --set xtrain.model.seq_len="$SEQ" --set xtrain.model.dropout=0 --set train_micro_batch_size_per_gpu="$MICRO" \
      --set xtrain.steps="$STEPS" --set steps_per_print=4 --set xtrain.eval_interval=0 --set xtrain.save_interval=-1 \
      --set xtrain.eval_batches=1 --set xtrain.generate.tokens=0 \
      --set zero_optimization.offload_optimizer.nvme_path="$NVME_DIR" "${extra[@]}" --output "$run" >"$run.log" 2>&1 ||
      { echo "$name round $rep: failed, see $run.log"; tail -5 "$run.log"; }
  done
done
printf '%-22s %10s %9s %14s %12s %13s\n' variant "tok/s" "vs stage0" "states MB/rank" "formula MB" "peak RSS MB"
python3 - "$OUT" "$REPS" $VARIANTS <<'PY'
import json, re, sys
out, reps, variants = sys.argv[1], int(sys.argv[2]), [v.split(":")[0] for v in sys.argv[3:]]
base = None
for name in variants:
    toks, last, formula = [], None, "?"
    for rep in range(1, reps + 1):
        try:
            rows = [json.loads(l) for l in open(f"{out}/{name}-{rep}/metrics.jsonl") if '"train/tokens_per_s"' in l]
        except OSError:
            continue
        rows = rows[1:] or rows  # the first window includes warm-up
        if not rows:
            continue
        toks.append(sum(r["train/tokens_per_s"] for r in rows) / len(rows))
        last = rows[-1]
        m = re.search(r"formula: ([0-9.]+) MB", open(f"{out}/{name}-{rep}.log").read())
        formula = m.group(1) if m else "?"
    if not toks:
        print(f"{name:<22} failed")
        continue
    tok = sum(toks) / len(toks)
    base = base or tok
    states = sum(v for k, v in last.items() if k.startswith("memory/") and k.endswith("_mb") and "rss" not in k and "nvme" not in k)
    runs = " ".join(f"{t:.0f}" for t in toks)
    print(f"{name:<22} {tok:10.0f} {tok / base:8.2f}x {states:14.1f} {formula:>12} {last['memory/peak_rss_mb']:13.0f}   ({runs})")
PY
