#!/usr/bin/env bash
# CPU GPT training: xtrain (bench/gpt_train.cpp) against PyTorch eager (bench/peers/gpt_peer.py, the
# same model and step), side by side, in the machine's environment as it is. PyTorch runs twice:
# as shipped (`--tuning shipped`: torch.set_num_threads only, which Debian's torch does not pass on
# to OpenBLAS), and tuned by an expert (`--tuning expert`: the peer re-executes itself with
# OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = the cell's threads, OMP_WAIT_POLICY=
# PASSIVE, GOMP_SPINCOUNT=0, OPENBLAS_THREAD_TIMEOUT=4, GLIBC_TUNABLES=glibc.malloc.hugetlb=1 and
# OPENBLAS_CORETYPE unset, all before torch is imported; bench/peers/expert_env.py). xtrain gets no
# settings (it re-executes itself with its own). Two shapes (small GPT; GPT-2-small layers at
# T=64), fp32 and bf16, 1 and 2 threads, each repeated; the three implementations of one cell run
# back to back so noise hits them alike. Prints what each peer ran with, the median tokens/s, MFU
# against the GEMM peak measured first (bench/gemm_peak.cpp: best of oneDNN and ATen over 512^3 to
# 2048^3; where xtrain's model FLOP rate is higher, the peak is raised to it and marked `*`, as
# `xtrain train` does: MFU is never above 100%), peak RSS and the ratios, then the goals. Not a test.
#   BUILD_DIR=/work/main/build bench/cpu_train.sh
#   REPS=3 CONFIGS="small gpt2" DTYPES="fp32 bf16" THREADS="1 2" bench/cpu_train.sh
# BUILD_DIR defaults to ./build; BENCH_DIR=<dir with bench_gpt_train, bench_gemm_peak> skips ninja.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
REPS=${REPS:-3}
CONFIGS=${CONFIGS:-"small gpt2"}
DTYPES=${DTYPES:-"fp32 bf16"}
THREADS=${THREADS:-"1 2"}
PY=/usr/bin/python3
if [[ -z "${BENCH_DIR:-}" ]]; then
  ninja -C "$BUILD_DIR" -j2 bench_gpt_train bench_gemm_peak >&2
  BENCH_DIR=$BUILD_DIR/bench
fi

declare -A SHAPE=(
  [small]="--layers 4 --d 256 --heads 4 --seq 256 --batch 8 --vocab 256 --steps 10 --warmup 3"
  [gpt2]="--layers 12 --d 768 --heads 12 --seq 64 --batch 4 --vocab 50257 --steps 4 --warmup 2"
)
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  reps: $REPS"
echo "# environment: $(env | grep -E '^(OPENBLAS_|OMP_|GLIBC_TUNABLES|MKL_)' | tr '\n' ' ' || true)"
"$BENCH_DIR/bench_gemm_peak" --threads "${THREADS// /,}" --sizes 512,1024,1536,2048 | sed 's/^/peak /' >>"$LOG"
for rep in $(seq "$REPS"); do
  for cfg in $CONFIGS; do
    for dtype in $DTYPES; do
      for t in $THREADS; do
        args="${SHAPE[$cfg]} --dtype $dtype --threads $t"
        echo "# rep $rep $cfg $dtype $t threads (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        # shellcheck disable=SC2086
        echo "run $cfg xtrain $("$BENCH_DIR/bench_gpt_train" $args 2>/dev/null)" >>"$LOG"
        # shellcheck disable=SC2086
        echo "run $cfg pytorch $($PY "$ROOT/bench/peers/gpt_peer.py" $args --tuning shipped)" >>"$LOG"
        # shellcheck disable=SC2086
        echo "run $cfg pytorch_tuned $($PY "$ROOT/bench/peers/gpt_peer.py" $args --tuning expert)" >>"$LOG"
      done
    done
  done
done

$PY - "$LOG" <<'EOF'
import json, statistics, sys
from collections import defaultdict
peak, runs, fpt, settings = {}, defaultdict(list), {}, {}
for line in open(sys.argv[1]):
    kind, rest = line.split(" ", 1)
    if kind == "peak":
        p = json.loads(rest); peak[(p["dtype"], p["threads"])] = p["peak_gflops"]; continue
    cfg, impl, js = rest.split(" ", 2)
    r = json.loads(js)
    if "error" in r:
        runs[(cfg, r["dtype"], r["threads"], impl)].append(None); continue
    runs[(cfg, r["dtype"], r["threads"], impl)].append(r)
    if impl == "xtrain": fpt[cfg] = r["flops_per_token"]
    if "settings" in r: settings[(impl, r["threads"])] = r["settings"]
def med(cell, field):
    v = [r[field] for r in runs.get(cell, []) if r]
    return statistics.median(v) if v else None
for (impl, t), s in sorted(settings.items()):
    env = " ".join(f"{k}={v}" for k, v in s["env"].items()) or "(nothing set)"
    print(f"{impl} {t} threads ({s['tuning']}): {env}; torch threads {s['torch_threads']}, "
          f"OpenBLAS threads {s['openblas_threads']}")
print("GEMM peak (GFLOP/s, best of oneDNN and ATen, 512^3 to 2048^3): " +
      ", ".join(f"{d} {t}t {v:.0f}" for (d, t), v in sorted(peak.items())))
# MFU never above 100%: a model FLOP rate above the GEMM peak raises the peak to it (marked *).
raised = {}
for (cfg, dtype, t, impl), rs in runs.items():
    for r in rs:
        if r and impl == "xtrain" and (dtype, t) in peak and cfg in fpt:
            rate = r["tokens_per_s"] * fpt[cfg] / 1e9
            if rate > peak[(dtype, t)]:
                peak[(dtype, t)] = rate; raised[(dtype, t)] = True
print(f"{'config':6} {'dtype':5} {'thr':>3} | {'xtrain tok/s':>12} {'MFU':>5} {'RSS MB':>7} | {'pytorch':>8} {'RSS MB':>7} |"
      f" {'tuned':>8} {'RSS MB':>7} | {'x/pt':>6} {'x/tuned':>7} {'reps':>4}")
cells = sorted({k[:3] for k in runs}, key=lambda k: (k[0] != "small", k[1], k[2]))
ratios = {}
for cfg, dtype, t in cells:
    x, p, q = (med((cfg, dtype, t, i), "tokens_per_s") for i in ("xtrain", "pytorch", "pytorch_tuned"))
    rx, rp, rq = (med((cfg, dtype, t, i), "peak_rss_mb") for i in ("xtrain", "pytorch", "pytorch_tuned"))
    n = len([r for r in runs.get((cfg, dtype, t, "xtrain"), []) if r])
    f = lambda v, w=8, d=0: f"{v:{w}.{d}f}" if v is not None else f"{'n/a':>{w}}"
    mfu = x * fpt[cfg] / (peak[(dtype, t)] * 1e9) if x and cfg in fpt and (dtype, t) in peak else None
    ratios[(cfg, dtype, t)] = (x, q)
    star = "*" if raised.get((dtype, t)) else " "
    print(f"{cfg:6} {dtype:5} {t:3} | {f(x, 12)} {f(mfu * 100 if mfu else None, 4)}%{star}{f(rx, 7)} | {f(p)} {f(rp, 7)} |"
          f" {f(q)} {f(rq, 7)} | {f(x / p if x and p else None, 5, 2)}x {f(x / q if x and q else None, 6, 2)}x {n:4}"
          + ("" if x else "   (xtrain: n/a, bf16 not supported yet)"))
if raised:
    print("* the GEMM peak of " + ", ".join(f"{d} {t}t" for d, t in sorted(raised)) + " was raised to xtrain's best "
          f"model FLOP rate: " + ", ".join(f"{d} {t}t {peak[(d, t)]:.0f}" for d, t in sorted(raised)))
print("goals:")
for cfg in ("small", "gpt2"):
    for dtype in ("fp32", "bf16"):
        x, q = ratios.get((cfg, dtype, 2), (None, None))
        ok = x and q and x / q >= 1.2
        print(f"  xtrain >= 1.2x tuned PyTorch, {cfg} {dtype} 2 threads: "
              + (f"{x / q:.2f}x {'met' if ok else 'NOT met'}" if x and q else "n/a"))
x = ratios.get(("small", "fp32", 2), (None, None))[0]
if x and ("fp32", 2) in peak and "small" in fpt:
    m = x * fpt["small"] / (peak[("fp32", 2)] * 1e9)
    print(f"  MFU >= 55% of the fp32 GEMM peak, small 2 threads: {m * 100:.0f}% {'met' if m >= 0.55 else 'NOT met'}")
xb, xf = (ratios.get(("gpt2", d, 2), (None, None))[0] for d in ("bf16", "fp32"))
if xb and xf:
    print(f"  bf16 >= 1.5x xtrain fp32, gpt2 2 threads: {xb / xf:.2f}x {'met' if xb / xf >= 1.5 else 'NOT met'}")
EOF
