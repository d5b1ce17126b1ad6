#!/usr/bin/env bash
# Curriculum benchmark (issue 10): validation loss against tokens seen for the default small GPT
# (configs/gpt_small.json at T=128, micro 8, no accumulation), five variants at equal training
# tokens: the baseline; the sequence-length curriculum (curriculum_learning, fixed_linear 32 → 128
# over the first half, run for as many extra steps as its shorter sequences saved); difficulty-
# ordered sampling (xtrain.data.ordering, DELT-style) by unigram entropy, plainly and folded; and
# ordering by the loss of a reference model (the baseline run's final checkpoint). The same seed,
# data and validation windows everywhere, dropout off; val loss is always at the full T=128.
# Prints a table at several token counts and writes curriculum.svg (by hand: no plotting library
# for Debian's python3 here).
# Not a test.
#   BUILD_DIR=/tmp/build-delt bench/curriculum.sh            # ~10 minutes on 2 busy cores
#   STEPS=300 OUT=/tmp/curriculum bench/curriculum.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
XT=$BUILD_DIR/xtrain
STEPS=${STEPS:-300}
OUT=${OUT:-$(mktemp -d /tmp/xtrain-curriculum.XXXX)}
VARIANTS=${VARIANTS:-"baseline seqlen entropy entropy_folded loss"}
PY=/usr/bin/python3
B=8 T=128 MIN_T=32 RAMP=$((STEPS / 2)) EVAL_EVERY=$((STEPS / 6))
rm -rf "$OUT" && mkdir -p "$OUT"

# The seqlen run's step count for equal tokens: DeepSpeed's fixed_linear difficulty at step s
# (1-based, as update_difficulty sees it), q = 8.
CURR_STEPS=$($PY - "$STEPS" "$RAMP" "$MIN_T" "$T" <<'EOF2'
import math, sys
steps, ramp, mn, mx = map(int, sys.argv[1:])
def seqlen(s):
    v = math.floor((s / ramp) * (mx - mn) + mn); v -= v % 8
    return min(max(v, -(-mn // 8) * 8), mx)
target, tok, s = steps * mx, 0, 0
while tok < target:
    s += 1; tok += seqlen(s)
print(s)
EOF2
)

common=(--config "$ROOT/configs/gpt_small.json" --set gradient_accumulation_steps=1
        --set train_micro_batch_size_per_gpu=$B --set xtrain.model.seq_len=$T
        --set xtrain.eval_batches=50 --set xtrain.save_interval=0 --set xtrain.generate.tokens=0
        --set scheduler.params.warmup_num_steps=30 --set xtrain.log_interval=10
        --set xtrain.model.dropout=0.0)  # dropout 0.1 currently wrecks the model at one step (see RESULTS_curriculum.md)
run() {  # name steps extra-args...
  local name=$1 steps=$2; shift 2
  echo "# $(date -u +%T) $name: $steps steps (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  "$XT" train "${common[@]}" --set xtrain.steps="$steps" --set scheduler.params.total_num_steps="$steps" \
    --set xtrain.eval_interval="$EVAL_EVERY" --output "$OUT/$name" "$@" >"$OUT/$name.log" 2>&1 ||
    { tail -20 "$OUT/$name.log" >&2; exit 1; }
}
ordering=(--set xtrain.data.ordering.enabled=true --set xtrain.data.ordering.random_mix=0.1)
for v in $VARIANTS; do
  case $v in
    baseline) run baseline "$STEPS" ;;
    seqlen) run seqlen "$CURR_STEPS" --set curriculum_learning.enabled=true \
      --set curriculum_learning.min_difficulty=$MIN_T --set curriculum_learning.max_difficulty=$T \
      --set curriculum_learning.schedule_type=fixed_linear \
      --set curriculum_learning.schedule_config.total_curriculum_step=$RAMP \
      --set curriculum_learning.schedule_config.difficulty_step=8 ;;
    entropy) run entropy "$STEPS" "${ordering[@]}" ;;
    entropy_folded) run entropy_folded "$STEPS" "${ordering[@]}" --set xtrain.data.ordering.folds=3 ;;
    loss) run loss "$STEPS" "${ordering[@]}" --set xtrain.data.ordering.scorer=loss \
      --set xtrain.data.ordering.reference_checkpoint="$OUT/baseline" ;;
  esac
done

$PY - "$OUT" "$B" "$T" "$RAMP" "$MIN_T" "$VARIANTS" <<'EOF2'
import json, math, os, sys
out, B, T, ramp, mn = sys.argv[1], *map(int, sys.argv[2:6])
variants = sys.argv[6].split()
def seqlen(s):
    v = math.floor((s / ramp) * (mx - mn) + mn); v -= v % 8
    return min(max(v, -(-mn // 8) * 8), mx)
mx = T
curves = {}
for v in variants:
    pts = []
    for line in open(os.path.join(out, v, "metrics.jsonl")):
        r = json.loads(line)
        if "val/loss" not in r: continue
        step = r["step"]
        tokens = B * (sum(seqlen(s) for s in range(1, step + 1)) if v == "seqlen" else step * T)
        pts.append((tokens, r["val/loss"]))
    curves[v] = sorted(set(pts))
grid = [t for t, _ in curves[variants[0]]]
def at(v, t):  # linear interpolation in tokens (the seqlen run evaluates at other token counts)
    p = curves[v]
    for (t0, l0), (t1, l1) in zip(p, p[1:]):
        if t0 <= t <= t1: return l0 + (l1 - l0) * (t - t0) / (t1 - t0)
    return next((l for tt, l in p if tt == t), float("nan"))
print("val loss (nats/byte; 50 x 8 windows of 128 bytes) at equal training tokens"
      + (" (seqlen: interpolated)" if "seqlen" in variants else "") + ":")
print("tokens".rjust(9) + "".join(v.rjust(16) for v in variants))
for t in grid:
    print(f"{t:9d}" + "".join(f"{at(v, t):16.4f}" for v in variants))
# A hand-written SVG line chart (no plotting library for Debian's python3 here).
W, H, M = 720, 420, 60
xs = [t for v in variants for t, _ in curves[v]]; ys = [l for v in variants for _, l in curves[v]]
x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
X = lambda t: M + (W - 2 * M) * (t - x0) / (x1 - x0)
Y = lambda l: H - M - (H - 2 * M) * (l - y0) / (y1 - y0)
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="20" text-anchor="middle">val loss vs training tokens (gpt_small, T={T}, B={B})</text>']
for i in range(6):
    l = y0 + (y1 - y0) * i / 5; t = x0 + (x1 - x0) * i / 5
    svg += [f'<line x1="{M}" x2="{W-M}" y1="{Y(l):.1f}" y2="{Y(l):.1f}" stroke="#ddd"/>',
            f'<text x="{M-5}" y="{Y(l)+4:.1f}" text-anchor="end">{l:.2f}</text>',
            f'<text x="{X(t):.1f}" y="{H-M+16}" text-anchor="middle">{t/1000:.0f}k</text>']
for i, v in enumerate(variants):
    c = colors[i % len(colors)]
    svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
               + " ".join(f"{X(t):.1f},{Y(l):.1f}" for t, l in curves[v]) + '"/>')
    svg.append(f'<text x="{W-M-120}" y="{M+16*i}" fill="{c}">{v}</text>')
svg.append("</svg>")
open(os.path.join(out, "curriculum.svg"), "w").write("\n".join(svg))
print("plot:", os.path.join(out, "curriculum.svg"))
EOF2
echo "runs in $OUT"
