#!/usr/bin/env bash
# Issue 22 part 5: does `xtrain train` with no config learn faster than the best plain-PyTorch recipe
# for the same wall time? Runs, one after the other on the same machine: the default run
# (`xtrain train`, configs/default.json, clock from launch to each validation, start-up included)
# and bench/peers/default_run_peer.py (the same model and data in PyTorch, expert process settings,
# fp32 or bf16 autocast whichever is faster, the cosine fitted to the budget). Then one evaluator
# (the peer's, fp32, every non-overlapping 256-byte window of the validation text) scores both
# final models. Prints both curves, the validation each reached at the budget, the time each took
# to reach TARGET, and writes OUT/default_run.svg (docs/default_run.svg is a copy of one run's).
# Needs a quiet machine: 2 cores, nothing else running; the load average is printed.
#
# usage: bench/default_run_quality.sh
# env: XTRAIN (default build/xtrain), OUT (default a temp folder), SECONDS_BUDGET (300),
#      TARGET (1.60 nats/byte), ORDER ("xtrain peer" or "peer xtrain")
set -euo pipefail
cd "$(dirname "$0")/.."
XTRAIN=${XTRAIN:-build/xtrain}
OUT=${OUT:-$(mktemp -d /tmp/default_run.XXXX)}
SECONDS_BUDGET=${SECONDS_BUDGET:-300}
TARGET=${TARGET:-1.60}
ORDER=${ORDER:-"xtrain peer"}
DATA=${XTRAIN_DATA_DIR:-$HOME/.cache/xtrain/data}/mobydick/data.txt
unset XTRAIN_SMOKE
[ -f "$DATA" ] || { echo "missing $DATA: run scripts/xtrain once (it downloads Moby Dick)" >&2; exit 1; }
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  budget ${SECONDS_BUDGET}s  $(git rev-parse --short HEAD)"
for side in $ORDER; do
  echo "  $side ... (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  if [ "$side" = xtrain ]; then
    rm -rf "$OUT/xtrain"
    date +%s.%N > "$OUT/xtrain.start"
    "$XTRAIN" train --output "$OUT/xtrain" > "$OUT/xtrain.log" 2>&1 || { tail -20 "$OUT/xtrain.log" >&2; exit 1; }
    date +%s.%N > "$OUT/xtrain.end"
  else
    /usr/bin/python3 bench/peers/default_run_peer.py --data "$DATA" --seconds "$SECONDS_BUDGET" > "$OUT/peer.jsonl"
  fi
done
PYTHONPATH=$(dirname "$XTRAIN")/python /usr/bin/python3 bench/peers/default_run_peer.py --data "$DATA" \
  --score "$OUT/xtrain" > "$OUT/xtrain_score.json"
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 bench/default_run_quality.py "$OUT" "$SECONDS_BUDGET" "$TARGET"
