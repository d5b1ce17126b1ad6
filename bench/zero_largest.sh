#!/usr/bin/env bash
# The largest GPT that trains on this machine with 2 ranks, per ZeRO variant: for each variant the
# sizes are tried in order (2 optimizer steps each, AdamW, micro-batch 1 x 64 tokens) and the
# run's outcome, rank 0's peak RSS, the largest anonymous memory (RssAnon, sampled every 0.3 s) of
# any rank, model states in memory and on disk, the step time and the validation loss printed.
# The first failure ends a variant (the kernel's OOM killer ends a rank that does not fit).
# warmup_min_ratio 1: the second step updates the weights at the full learning rate (the first
# step's is 0 under DeepSpeed's schedules). lr 1e-7: Adam's first update moves every weight by
# about lr, so the loss changes by about lr x ||g||_1, which grows with the parameter count (a 5B
# GPT's validation loss went 6.4 -> 28 at lr 1e-3 and -> 23 at 1e-5).
# fp32 AdamW unless EXTRA says otherwise.
#   XTRAIN=build/xtrain NVME_DIR=/tmp/zero-nvme bench/zero_largest.sh "stage0:16x1536,16x1792" "stage3nvme:16x3072"
# A variant is stage0 | stage2 | stage3 | stage3nvme (optimizer state and parameters on NVMe);
# a size is LAYERSxD_MODEL (heads = D_MODEL / 128). EXTRA: more --set arguments for every run
# (e.g. "--set bf16.enabled=true --set data_types.grad_accum_dtype=bf16"). SUB_GROUP: sub_group_size
# of the NVMe variant (default 50M elements; its three chunk buffers are 36 bytes per element with
# fp32 optimizer state, 18 with optimizer.params.state_dtype=int8).
# MEM_CAP_MB: run both ranks (and the launcher) under a memory cap of that many MB instead of the
# whole machine: a cgroup the script creates (cgroup v2 memory.max, or v1 memory.limit_in_bytes,
# under CGROUP_ROOT, found by default; needs root) and removes at the end, so that each size takes
# seconds to minutes, not hours. Its peak usage (anonymous memory and page cache together) is the
# "cap peak MB" column; the kernel's OOM killer ends a run that does not fit.
set -uo pipefail
XTRAIN=${XTRAIN:-build/xtrain}
OUT=${OUT:-/tmp/xtrain-zero-largest}
NVME_DIR=${NVME_DIR:-$OUT/nvme}
SEQ=${SEQ:-64}
read -r -a extra_sets <<<"${EXTRA:-}"
# Freed blocks the memory pool may keep per rank: little, near the memory limit.
export XTRAIN_MEMORY_POOL_CACHE_MB=${XTRAIN_MEMORY_POOL_CACHE_MB:-256}
mkdir -p "$OUT" "$NVME_DIR"
cgroup=""
if [ -n "${MEM_CAP_MB:-}" ]; then
  root=${CGROUP_ROOT:-}
  if [ -z "$root" ]; then
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then root=/sys/fs/cgroup; else root=/sys/fs/cgroup/memory; fi
  fi
  cgroup="$root/xtrain_zero_largest_$$"
  mkdir "$cgroup" || { echo "cannot create the cgroup $cgroup (MEM_CAP_MB needs root and a memory controller)"; exit 2; }
  trap 'rmdir "$cgroup" 2>/dev/null' EXIT
  if [ -f "$cgroup/memory.max" ]; then
    echo $((MEM_CAP_MB * 1024 * 1024)) >"$cgroup/memory.max"
    echo 0 >"$cgroup/memory.swap.max" 2>/dev/null
  else
    echo $((MEM_CAP_MB * 1024 * 1024)) >"$cgroup/memory.limit_in_bytes"
  fi
  echo "# memory cap: $MEM_CAP_MB MB for both ranks ($cgroup)"
fi
cap_peak() {  # MB; the cgroup's peak usage since the last reset
  if [ -z "$cgroup" ]; then echo 0
  elif [ -f "$cgroup/memory.peak" ]; then echo $(($(cat "$cgroup/memory.peak") / 1048576))
  elif [ -f "$cgroup/memory.max_usage_in_bytes" ]; then echo $(($(cat "$cgroup/memory.max_usage_in_bytes") / 1048576))
  else echo 0; fi
}
echo "# $(date -u +%FT%TZ)  $(nproc) cores  $(free -g | awk '/Mem:/ {print $2}') GiB  free disk $(df -BG --output=avail "$NVME_DIR" | tail -1 | tr -d ' ')  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-11s %-9s %9s %-6s %12s %13s %12s %14s %10s %10s %8s\n' variant size params result "peak RSS MB" "peak anon MB" \
  "cap peak MB" "states MB/rank" "disk GB" "s/step" "val loss"
for spec in "$@"; do
  variant=${spec%%:*}
  case $variant in
    stage0) sets=(--set zero_optimization.stage=0) ;;
    stage2) sets=(--set zero_optimization.stage=2) ;;
    stage3) sets=(--set zero_optimization.stage=3) ;;
    stage3nvme) sets=(--set zero_optimization.stage=3
      --set zero_optimization.offload_optimizer.device=nvme --set zero_optimization.offload_optimizer.nvme_path="$NVME_DIR"
      --set zero_optimization.offload_param.device=nvme --set zero_optimization.offload_param.nvme_path="$NVME_DIR"
      --set zero_optimization.sub_group_size="${SUB_GROUP:-50000000}") ;;
    *) echo "unknown variant $variant"; exit 2 ;;
  esac
  IFS=',' read -r -a sizes <<<"${spec#*:}"
  for size in "${sizes[@]}"; do
    layers=${size%x*}
    dmodel=${size#*x}
    run="$OUT/$variant-$size"
    rm -rf "$run" "$NVME_DIR"/xtrain_*
    start=$(date +%s)
    # A new cgroup per size would reset memory.peak (v2); v1 resets max_usage_in_bytes on a write.
    [ -n "$cgroup" ] && [ -f "$cgroup/memory.max_usage_in_bytes" ] && echo 0 >"$cgroup/memory.max_usage_in_bytes"
    in_cgroup=()
    [ -n "$cgroup" ] && in_cgroup=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgroup")
    "${in_cgroup[@]}" "$XTRAIN" launch -N 2 -- train --config configs/gpt_small.json \
      --set xtrain.model.layers="$layers" --set xtrain.model.d_model="$dmodel" --set xtrain.model.heads=$((dmodel / 128)) \
      --set xtrain.model.seq_len="$SEQ" --set xtrain.model.dropout=0 --set train_micro_batch_size_per_gpu=1 \
      --set gradient_accumulation_steps=1 --set xtrain.steps=2 --set steps_per_print=1 --set xtrain.eval_interval=0 \
      --set xtrain.save_interval=-1 --set xtrain.eval_batches=1 --set xtrain.generate.tokens=0 \
      --set xtrain.monitor.peak_tflops=1 --set scheduler.params.warmup_min_ratio=1 \
      --set optimizer.params.lr=1e-7 "${sets[@]}" "${extra_sets[@]}" --output "$run" >"$run.log" 2>&1 &
    launcher=$!
    anon=0  # MB; what the OOM killer weighs (the parameter file's pages are file-backed)
    while kill -0 "$launcher" 2>/dev/null; do
      for p in $(pgrep -P "$launcher"); do
        a=$(awk '/^RssAnon/ {print int($2 / 1024)}' "/proc/$p/status" 2>/dev/null)
        if [ -n "$a" ] && [ "$a" -gt "$anon" ]; then anon=$a; fi
      done
      sleep 0.3
    done
    wait "$launcher"
    code=$?
    secs=$(($(date +%s) - start))
    python3 - "$run/metrics.jsonl" "$run.log" "$variant" "$size" "$code" "$secs" "$SEQ" "$anon" "$(cap_peak)" <<'EOF'
import json, os, re, sys
metrics, log, variant, size, code, secs, seq, anon, cap = sys.argv[1:10]
text = open(log).read()
m = re.search(r"model: gpt with (\d+) parameters", text)
params = f"{int(m.group(1)) / 1e9:.2f}B" if m else "?"
rows = [json.loads(l) for l in open(metrics)] if os.path.exists(metrics) else []
rows = [r for r in rows if "memory/peak_rss_mb" in r]
ok = code == "0" and rows
peak = max((r["memory/peak_rss_mb"] for r in rows), default=0)
last = rows[-1] if rows else {}
states = sum(v for k, v in last.items() if k.startswith("memory/") and k.endswith("_mb") and "rss" not in k and "nvme" not in k)
disk = last.get("memory/nvme_mb", 0) / 1e3
steps = [r for r in rows if "train/tokens_per_s" in r]
step_s = 2 * int(seq) / steps[-1]["train/tokens_per_s"] if steps else float("nan")
m = re.search(r"val loss ([0-9.]+)", text)
val = m.group(1)[:6] if m else "-"
print(f"{variant:<11} {size:<9} {params:>9} {'ok' if ok else 'FAIL':<6} {peak:12.0f} {int(anon):13d} {int(cap):12d} {states:14.0f} "
      f"{disk:10.1f} {step_s:10.1f} {val:>8}   ({secs} s)")
EOF
    if [ "$code" != 0 ]; then tail -3 "$run.log" | sed 's/^/    /'; break; fi
  done
done
rm -rf "$NVME_DIR"/xtrain_*
