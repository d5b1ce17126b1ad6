#!/usr/bin/env bash
# Multi-scale attention for images (issue 25 part 3): Fashion-MNIST at 28x28 and upsampled to
# 112x112 (xtrain.data.image_size), ViT with dense attention vs ViT with 2-D multi-scale attention
# vs ResNet-18 (configs/mnist_resnet18.json's recipe on Fashion-MNIST). EQUAL STEPS: every model
# sees the same number of steps of the same batch size (the training data is the full 60k set,
# sampled; STEPS x BATCH images, a fraction of one epoch); accuracy on the first EVAL_BATCHES x BATCH
# validation images. Training time is the summed step durations (metrics.jsonl: samples over
# train/samples_per_s), so evaluation and start-up are not counted. Then bench_vit_attention:
# attention and ViT step time against the patch count, dense vs multi-scale.
# The machine is shared (2 cores, load printed in the header): times are noisy.
#
# usage: bench/vit.sh [STEPS (default 300)] [BATCH (default 64)]
# env: XTRAIN (default build/xtrain), OUT (default a temp folder), THREADS (default 2),
#      EVAL_BATCHES (default 40), SKIP_RESNET_112 (default 1: ResNet-18 at 112x112 runs 16x the
#      28x28 FLOPs, beyond this bench's 30-minute budget on 2 cores; 0 runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
XTRAIN=${XTRAIN:-build/xtrain}
STEPS=${1:-300}
BATCH=${2:-64}
OUT=${OUT:-$(mktemp -d /tmp/vit_bench.XXXX)}
THREADS=${THREADS:-2}
EVAL_BATCHES=${EVAL_BATCHES:-40}
SKIP_RESNET_112=${SKIP_RESNET_112:-1}
unset XTRAIN_SMOKE
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  $STEPS steps x batch $BATCH (equal steps)"

common=(--set "xtrain.threads=$THREADS" --set xtrain.save_interval=0 --set "xtrain.steps=$STEPS"
        --set "xtrain.eval_interval=$STEPS" --set "xtrain.eval_batches=$EVAL_BATCHES"
        --set "train_batch_size=$BATCH" --set "train_micro_batch_size_per_gpu=$BATCH"
        --set "scheduler.params.total_num_steps=$STEPS" --set "scheduler.params.warmup_num_steps=$((STEPS / 10))")
resnet=(--set xtrain.data.type=fashion_mnist --set "scheduler.params.cycle_first_step_size=$((STEPS / 2))")
run() {  # name config [overrides...]
  local name=$1 config=$2
  shift 2
  local extra=("${common[@]}")
  [[ $config == *resnet* ]] && extra=(--set xtrain.threads="$THREADS" --set xtrain.save_interval=0 --set "xtrain.steps=$STEPS"
                                      --set "xtrain.eval_interval=$STEPS" --set "xtrain.eval_batches=$EVAL_BATCHES"
                                      --set "train_batch_size=$BATCH" --set "train_micro_batch_size_per_gpu=$BATCH" "${resnet[@]}")
  echo "  $name ..." >&2
  "$XTRAIN" train --config "$config" "${extra[@]}" "$@" --output "$OUT/$name" > "$OUT/$name.log" 2>&1 ||
    { tail -20 "$OUT/$name.log" >&2; exit 1; }
}
ms=(--set xtrain.model.attention.type=multiscale)
run vit_dense_28 configs/fashion_vit.json
run vit_ms_28 configs/fashion_vit.json "${ms[@]}"
run resnet18_28 configs/mnist_resnet18.json
run vit_dense_112 configs/fashion_vit_112.json --set xtrain.model.attention.type=dense
run vit_ms_112 configs/fashion_vit_112.json
[ "$SKIP_RESNET_112" = 0 ] && run resnet18_112 configs/mnist_resnet18.json --set xtrain.data.image_size=112

/usr/bin/python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]

def read(name):
    path = os.path.join(out, name, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    recs = [json.loads(l) for l in open(path) if l.strip()]
    secs, samples = 0.0, 0.0
    for r in sorted((r for r in recs if "train/samples_per_s" in r), key=lambda r: r["step"]):
        secs += (r["train/samples"] - samples) / r["train/samples_per_s"]
        samples = r["train/samples"]
    acc = [r["val/accuracy"] for r in recs if "val/accuracy" in r]
    return secs, (acc[-1] if acc else float("nan"))

print(f"{'model':<15} {'image':>7} {'tokens':>6} {'train s':>8} {'x dense':>8} {'val acc':>8} {'vs dense':>9}")
for size, tokens in (("28", "49+1"), ("112", "196+1")):
    dense = read(f"vit_dense_{size}")
    for kind in ("vit_dense", "vit_ms", "resnet18"):
        r = read(f"{kind}_{size}")
        if r is None:
            print(f"{kind:<15} {size + 'x' + size:>7}  (not run)")
            continue
        t, acc = r
        print(f"{kind:<15} {size + 'x' + size:>7} {tokens if kind != 'resnet18' else '-':>6} {t:8.1f} "
              f"{t / dense[0]:8.2f} {100 * acc:7.2f}% {100 * (acc - dense[1]):+8.2f}pt")
PY
echo
ATT=${ATT:-build/bench/bench_vit_attention}
[ -x "$ATT" ] || { echo "no $ATT: build it (ninja target bench_vit_attention)" >&2; exit 1; }
"$ATT" --grids 7,14,28 --batch 8 --repeats 3
