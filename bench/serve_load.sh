#!/bin/bash
# Throughput and latency of `xtrain serve` under load (bench/serve_load.py on loopback): 1, 4, 16 and
# 64 concurrent clients, continuous batching on and off (--no-batching: one request at a time), the
# fp32 model and the int8 model of `xtrain compress`. The model: the default GPT (4 x 256, context
# 256) trained for a few steps (the weights do not change the cost: every request generates exactly
# max_tokens bytes). Then the KV cache against recomputation (bench/serve_kv_bench.cpp).
#   bench/serve_load.sh [requests=128] [max_tokens=64]
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-128}
MAX_TOKENS=${2:-64}
X=build/xtrain
WORK=$(mktemp -d /tmp/xtrain-serve-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/run
$X train --output "$RUN" --set xtrain.steps=10 --set xtrain.eval_interval=0 --set xtrain.eval_batches=1 \
  --set xtrain.generate.tokens=0 >/dev/null
$X compress --run "$RUN" --config bench/serve_compress.json >/dev/null

serve_and_load() {  # precision batching clients
  local flags=()
  [ "$1" = int8 ] && flags+=(--int8)
  [ "$2" = off ] && flags+=(--no-batching)
  $X serve --run "$RUN" --port 0 --max-batch 64 "${flags[@]}" >"$WORK/serve.out" 2>"$WORK/serve.err" &
  local pid=$!
  local port=""
  for _ in $(seq 200); do
    port=$(grep -o '127.0.0.1:[0-9]*' "$WORK/serve.out" 2>/dev/null | head -1 | cut -d: -f2) && [ -n "$port" ] && break
    sleep 0.1
  done
  local line
  line=$(/usr/bin/python3 bench/serve_load.py --port "$port" --clients "$3" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS")
  kill -TERM $pid
  wait $pid
  echo "$1 batching=$2 $line"
}

echo "requests=$REQUESTS max_tokens=$MAX_TOKENS (tokens/s = generated tokens / wall time)"
for precision in fp32 int8; do
  for batching in on off; do
    for clients in 1 4 16 64; do
      serve_and_load $precision $batching $clients | tee -a "$WORK/results"
    done
  done
done
/usr/bin/python3 - "$WORK/results" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    precision, batching, rest = line.split(" ", 2)
    r = json.loads(rest)
    rows[(precision, batching.split("=")[1], r["clients"])] = r
for precision in ("fp32", "int8"):
    on16, off16, on1 = rows[(precision, "on", 16)], rows[(precision, "off", 16)], rows[(precision, "on", 1)]
    print("%s: 16 clients batched %.0f tok/s = %.2fx one-at-a-time (16 clients, --no-batching %.0f tok/s), "
          "%.2fx one client; p99/p50 at 16 clients %.2f" % (
              precision, on16["tokens_per_s"], on16["tokens_per_s"] / off16["tokens_per_s"], off16["tokens_per_s"],
              on16["tokens_per_s"] / on1["tokens_per_s"], on16["p99_s"] / on16["p50_s"]))
PY
if [ -x build/bench/bench_serve_kv_bench ]; then build/bench/bench_serve_kv_bench; fi
