#!/usr/bin/env bash
# Architecture search on configs/nas_space_gpt.json (issue 25, part 2): GP-EI against random search
# with the same budget (TRIALS trials of SECONDS s of training time each, the same seed, so both
# start from the same GP_INITIAL random architectures), then the best architecture found against
# the default GPT (configs/default.json) at equal training time (FINAL_SECONDS each). Every run:
# Moby Dick, byte-level, fixed batch of 16 sequences, evaluation only at the end (20 batches),
# no checkpoint, no sample. xtrain.steps is only a cap (100000): the time budget stops each run, so
# the cosine schedule is nearly flat after its 50 warm-up steps, the same for every architecture.
# Prints the best validation loss after each quarter of the trials for both samplers and the
# final comparison (bench/nas.py). Wall time ~ 2 x TRIALS x (SECONDS + ~8 s) + 2 x FINAL_SECONDS.
#   XTRAIN=build/xtrain TRIALS=16 SECONDS=20 FINAL_SECONDS=60 bench/nas.sh
set -euo pipefail
XTRAIN=${XTRAIN:-build/xtrain}
OUT=${OUT:-/tmp/xtrain-nas}
TRIALS=${TRIALS:-16}
SECONDS_PER_TRIAL=${SECONDS:-20}
FINAL_SECONDS=${FINAL_SECONDS:-60}
GP_INITIAL=${GP_INITIAL:-6}
SEED=${SEED:-1}
OBJECTIVE2=${OBJECTIVE2:-params}
here=$(cd "$(dirname "$0")" && pwd)
common=(--set xtrain.steps=100000 --set xtrain.eval_interval=0 --set xtrain.save_interval=-1
        --set xtrain.generate.tokens=0 --set steps_per_print=10)
rm -rf "$OUT"
mkdir -p "$OUT"
echo "nas: $TRIALS trials x ${SECONDS_PER_TRIAL}s per sampler, GP after $GP_INITIAL random, seed $SEED; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for sampler in gp random; do
  start=$(date +%s)
  "$XTRAIN" tune --space "$here/../configs/nas_space_gpt.json" --trials "$TRIALS" --sampler "$sampler" \
    --gp-initial "$GP_INITIAL" --seed "$SEED" --trial-seconds "$SECONDS_PER_TRIAL" --objective2 "$OBJECTIVE2" \
    --study "$OUT/$sampler" "${common[@]}" > "$OUT/$sampler.log" 2>&1 || { tail -30 "$OUT/$sampler.log"; exit 1; }
  echo "nas: $sampler study took $(( $(date +%s) - start )) s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  sed -n '/Pareto front/,/wrote/p' "$OUT/$sampler.log" | grep -v "wrote"
done
# The better of the two studies' best architectures, against the default, at equal training time.
best=$(/usr/bin/python3 "$here/nas.py" best "$OUT/gp" "$OUT/random")
read -r -a best_sets <<<"$best"
echo "nas: best architecture: $best"
XTRAIN_TRAIN_SECONDS=$FINAL_SECONDS "$XTRAIN" train "${common[@]}" "${best_sets[@]}" --output "$OUT/final-best" \
  > "$OUT/final-best.log" 2>&1
XTRAIN_TRAIN_SECONDS=$FINAL_SECONDS "$XTRAIN" train "${common[@]}" --output "$OUT/final-default" \
  > "$OUT/final-default.log" 2>&1
echo "nas: load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$here/nas.py" report "$OUT" "$TRIALS"
