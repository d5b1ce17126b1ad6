#!/usr/bin/env bash
# Fused AdamW benchmark: xtrain's fused step (bench/fused_adamw.cpp) and torch.optim.AdamW
# (bench/peers/adamw_peer.py, default and foreach=True) on the same sizes and thread counts, run one
# after the other, then one table with the ratios. Not a test.
#   BUILD_DIR=/work/main/build bench/fused_adamw.sh [--sizes 10000000,100000000] [--threads 2,1] [--reps 11]
# BUILD_DIR defaults to ./build; BENCH_BIN=<path> uses an already built binary instead of ninja.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
if [[ -z "${BENCH_BIN:-}" ]]; then
  ninja -C "$BUILD_DIR" bench_fused_adamw >&2
  BENCH_BIN=$BUILD_DIR/bench/bench_fused_adamw
fi

echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  args: $*"
xtrain_out=$("$BENCH_BIN" "$@")
grep '^check' <<<"$xtrain_out"
torch_out=$(/usr/bin/python3 "$ROOT/bench/peers/adamw_peer.py" "$@")
grep '^settings' <<<"$torch_out" | sed 's/^/# torch /'  # thread variables each torch process ran with

{ grep '^xtrain ' <<<"$xtrain_out"; grep '^torch ' <<<"$torch_out"; } | awk '
  function field(name,   i, kv) {
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
  }
  {
    key = field("n") " " field("threads")
    if ($1 == "xtrain") {
      if (!(key in xt)) order[++count] = key
      xt[key] = field("adamw_ms"); gbps[key] = field("adamw_gbps"); bound[key] = field("bound_ms")
      ratio[key] = field("vs_bound"); isa[key] = field("isa")
    } else if (field("impl") == "torch_default") { td[key] = field("adamw_ms") }
    else { tf[key] = field("adamw_ms") }
  }
  END {
    printf "%-11s %3s %-7s %10s %7s %10s %8s | %13s %13s | %10s %10s\n", "params", "thr", "isa", "xtrain ms",
           "GB/s", "bound ms", "x/bound", "torch dflt ms", "torch fe ms", "vs dflt", "vs foreach"
    for (i = 1; i <= count; ++i) {
      k = order[i]; split(k, nk, " ")
      printf "%-11s %3s %-7s %10.2f %7.2f %10.2f %8.2f | %13.2f %13.2f | %9.1fx %9.1fx\n", nk[1], nk[2], isa[k],
             xt[k], gbps[k], bound[k], ratio[k], td[k], tf[k], td[k] / xt[k], tf[k] / xt[k]
    }
  }'
