#!/bin/sh
# A stand-in for `xtrain train` in the tune tests: it takes the same arguments (--config FILE,
# --set key=value ..., --output RUN_DIR) and appends metrics.jsonl lines like the trainer's, with
# val/loss following the curve  f + 4/step,  f = (log10(lr) + 2.5)² + 10 (dropout - 0.1)² + 1,
# so the tests need no real training run. Environment (all optional):
#   FAKE_STEPS        report steps (default "10 20 30 40")
#   FAKE_SLEEP        seconds to sleep before each report
#   FAKE_CRASH_ABOVE  crash (exit 3, a message on stderr) when lr is above this
#   FAKE_NO_METRIC    exit 0 without writing val/loss
#   FAKE_CURVE        "step:value step:value ..." reported instead of the formula (scripted curves)
#   FAKE_LINGER       seconds to stay alive after the last report (as the trainer saves a checkpoint)
# XTRAIN_TRAIN_SECONDS (tune --trial-seconds) is echoed on stdout.
out=""
lr=0.001
dropout=0.1
while [ $# -gt 0 ]; do
  case "$1" in
    --output) out=$2; shift 2 ;;
    --config) shift 2 ;;
    --set)
      case "$2" in
        optimizer.params.lr=*) lr=${2#*=} ;;
        xtrain.model.dropout=*) dropout=${2#*=} ;;
      esac
      shift 2 ;;
    *) echo "fake_trainer: unexpected argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "fake_trainer: no --output" >&2; exit 2; }
mkdir -p "$out"
echo "fake_trainer: lr=$lr dropout=$dropout"
[ -n "$XTRAIN_TRAIN_SECONDS" ] && echo "fake_trainer: XTRAIN_TRAIN_SECONDS=$XTRAIN_TRAIN_SECONDS"
if [ -n "$FAKE_CRASH_ABOVE" ] && awk -v a="$lr" -v b="$FAKE_CRASH_ABOVE" 'BEGIN { exit !(a + 0 > b + 0) }'; then
  echo "fake_trainer: step 1" >&2
  echo "RuntimeError: the loss is nan at step 3 (lr=$lr)" >&2
  exit 3
fi
[ -n "$FAKE_NO_METRIC" ] && exit 0
if [ -n "$FAKE_CURVE" ]; then
  for pair in $FAKE_CURVE; do
    [ -n "$FAKE_SLEEP" ] && sleep "$FAKE_SLEEP"
    echo "{\"step\": ${pair%%:*}, \"val/loss\": ${pair#*:}}" >> "$out/metrics.jsonl"
  done
  [ -n "$FAKE_LINGER" ] && sleep "$FAKE_LINGER"
  exit 0
fi
for s in ${FAKE_STEPS:-10 20 30 40}; do
  [ -n "$FAKE_SLEEP" ] && sleep "$FAKE_SLEEP"
  awk -v lr="$lr" -v d="$dropout" -v s="$s" 'BEGIN {
    f = (log(lr) / log(10) + 2.5) ^ 2 + 10 * (d - 0.1) ^ 2 + 1
    printf "{\"step\": %d, \"time\": 0, \"train/loss\": %.17g}\n", s, f + 5 / s
    printf "{\"step\": %d, \"time\": 0, \"val/loss\": %.17g}\n", s, f + 4 / s
  }' >> "$out/metrics.jsonl"
done
