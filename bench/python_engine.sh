#!/usr/bin/env bash
# xtrain from Python against plain PyTorch on the same Python GPT (bench/python_engine.py, the
# model of bench/peers/gpt_peer.py), side by side: each cell runs PyTorch (expert-tuned: OpenMP and
# OpenBLAS threads and passive waiting set before torch is imported, torch.optim.AdamW, autocast
# for bf16) and then the same module through xtrain.initialize, REPS times interleaved so noise hits
# both alike; prints median tokens/s and the ratio. Then ZeRO-2 against plain DP, both through
# `xtrain launch -N 2` (1 thread per rank), global tokens/s and the ratio. Not a test.
#   bench/python_engine.sh                         # defaults: 5.5 minutes on the loaded 2-core VM
#   REPS=3 STEPS=10 CELLS="small:fp32 small:bf16 gpt2:fp32 gpt2:bf16" bench/python_engine.sh
# bf16 cells are in the defaults only where the CPU has bf16 instructions (avx512_bf16 or amx_bf16):
# elsewhere ATen's bf16 GEMM is emulated and one step of the small GPT takes ~30 s.
# BUILD_DIR (default ./build) must hold xtrain and python/xtrain (`scripts/xtrain` or ninja
# xtrain xtrain_python). ZERO=0 skips the 2-rank part.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
REPS=${REPS:-1}
STEPS=${STEPS:-2}
WARMUP=${WARMUP:-1}
THREADS=${THREADS:-2}
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  CELLS=${CELLS:-"small:fp32 small:bf16 gpt2:fp32 gpt2:bf16"}
else
  CELLS=${CELLS:-"small:fp32 gpt2:fp32"}
fi
ZERO=${ZERO:-1}
PY=/usr/bin/python3
export PYTHONPATH=$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  reps: $REPS  steps: $STEPS (+$WARMUP warmup)  cells: $CELLS"
common="--steps $STEPS --warmup $WARMUP"
for rep in $(seq "$REPS"); do
  for cell in $CELLS; do
    shape=${cell%%:*} dtype=${cell##*:}
    echo "# rep $rep $shape $dtype (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    for impl in pytorch xtrain; do
      # shellcheck disable=SC2086
      $PY "$ROOT/bench/python_engine.py" --impl $impl --shape "$shape" --dtype "$dtype" --threads "$THREADS" $common \
        >>"$LOG" || echo "# $impl $shape $dtype failed" >&2
    done
  done
  if [[ $ZERO == 1 ]]; then
    for stage in 0 2; do
      echo "# rep $rep 2 ranks, ZeRO stage $stage (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      # shellcheck disable=SC2086
      "$BUILD_DIR/xtrain" launch -N 2 --program "$PY" -- "$ROOT/bench/python_engine.py" --impl xtrain --shape small \
        --threads 1 --zero "$stage" $common | sed -n 's/^[^{]*\({"impl".*\)$/\1/p' >>"$LOG" \
        || echo "# 2 ranks, ZeRO stage $stage failed" >&2
    done
  fi
done

$PY - "$LOG" <<'PYEOF'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["shape"], r["dtype"], r["ranks"], r["zero"], r["impl"])].append(r["tokens_per_s"])
med = {k: statistics.median(v) for k, v in runs.items()}
print("| shape | dtype | PyTorch tokens/s | xtrain.initialize tokens/s | xtrain / PyTorch |")
print("| --- | --- | ---: | ---: | ---: |")
for (shape, dtype, ranks, zero, impl), t in sorted(med.items()):
    if impl != "pytorch":
        continue
    x = med.get((shape, dtype, 1, 0, "xtrain"))
    print(f"| {shape} | {dtype} | {t:.0f} | {x:.0f} | {x / t:.2f}x |" if x else f"| {shape} | {dtype} | {t:.0f} | failed | |")
dp, z2 = med.get(("small", "fp32", 2, 0, "xtrain")), med.get(("small", "fp32", 2, 2, "xtrain"))
if dp and z2:
    print(f"2 ranks x 1 thread, small fp32: DP {dp:.0f} tokens/s, ZeRO-2 {z2:.0f} tokens/s, ZeRO-2 / DP {z2 / dp:.2f} "
          f"(goal >= 0.85)")
PYEOF
