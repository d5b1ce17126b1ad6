#!/usr/bin/env bash
# The real sweep of issue 8 (a benchmark, never run by the tests): the default GPT
# (configs/default.json), four hyperparameters (configs/tune_space_gpt.json: lr, warm-up steps,
# weight decay, dropout), TRIALS short trials each (xtrain.steps=150, validation every 50 steps),
# GP-EI against random search at the same budget and seed, ASHA early stopping. Prints, per
# sampler, the best validation loss, the wall time and the trials stopped early, as a markdown
# table for bench/RESULTS.md; each study folder keeps its trials, best_config.json and
# convergence.png.
#   bench/tune_sweep.sh [XTRAIN_BINARY] [OUT_DIR]
# Environment: TRIALS (20), PARALLEL (1), STEPS (150), EVAL (50), EVAL_BATCHES (10), PRUNER
# (asha), SEED (0), SAMPLERS ("gp random"), EXTRA_SET (more --set for every trial, e.g. a smaller
# model for a smoke run: "xtrain.model.layers=2 xtrain.model.d_model=64"). A study folder that
# exists is resumed, so an interrupted sweep continues where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
XTRAIN=${1:-build/xtrain}
OUT=${2:-runs/tune-sweep}
TRIALS=${TRIALS:-20}
PARALLEL=${PARALLEL:-1}
STEPS=${STEPS:-150}
EVAL=${EVAL:-50}
EVAL_BATCHES=${EVAL_BATCHES:-10}
PRUNER=${PRUNER:-asha}
SEED=${SEED:-0}
SAMPLERS=${SAMPLERS:-"gp random"}
PY=/usr/bin/python3

[ -x "$XTRAIN" ] || { echo "tune_sweep: no xtrain binary at $XTRAIN (build it first)" >&2; exit 2; }
"$XTRAIN" tune --help > /dev/null 2>&1 || { echo "tune_sweep: $XTRAIN has no 'tune' command" >&2; exit 2; }

sets=(--set "xtrain.steps=$STEPS" --set "xtrain.eval_interval=$EVAL" --set "xtrain.eval_batches=$EVAL_BATCHES"
      --set "xtrain.save_interval=0" --set "xtrain.generate.tokens=0")
for kv in ${EXTRA_SET:-}; do sets+=(--set "$kv"); done

declare -A wall
for sampler in $SAMPLERS; do
  study="$OUT/$sampler"
  echo "== $sampler: $TRIALS trials of $STEPS steps, $PARALLEL at a time, pruner $PRUNER -> $study"
  start=$(date +%s)
  "$XTRAIN" tune --config configs/default.json --space configs/tune_space_gpt.json --trials "$TRIALS" \
    --parallel "$PARALLEL" --metric val_loss --mode min --sampler "$sampler" --pruner "$PRUNER" --seed "$SEED" \
    --study "$study" "${sets[@]}"
  wall[$sampler]=$(( $(date +%s) - start ))
done

echo
echo "| sampler | trials | best val loss | best trial | complete | pruned (ASHA) | failed | wall time (s) |"
echo "|---|---|---|---|---|---|---|---|"
for sampler in $SAMPLERS; do
  "$PY" - "$OUT/$sampler" "${wall[$sampler]}" "$sampler" <<'PYEOF'
import glob, json, os, sys
study, wall, sampler = sys.argv[1], sys.argv[2], sys.argv[3]
trials = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(study, "trials", "*.json")))]
count = lambda s: sum(t["state"] == s for t in trials)
done = [t for t in trials if t["state"] == "complete" and t["value"] is not None]
best = min(done, key=lambda t: t["value"]) if done else None
print(f"| {sampler} | {len(trials)} | {best['value']:.4f} | {best['id']} | {count('complete')} | {count('pruned')} | "
      f"{count('failed')} | {wall} |" if best else f"| {sampler} | {len(trials)} | - | - | 0 | {count('pruned')} | "
      f"{count('failed')} | {wall} |")
PYEOF
done
