#!/usr/bin/env bash
# Multi-node scaling (issue 23, part 5): data-parallel and ZeRO-2 tokens/s and efficiency at 1/2/4
# "nodes" (network namespaces of tests/cluster/netns_cluster.py, one rank each: this machine has 2
# cores) for the default GPT (micro-batch 4) and GPT-2-small's blocks (12 x 768, 12 heads, byte vocabulary,
# seq 64, micro-batch 2),
# over unshaped and tbf-shaped links (25, 10, 1 gbit), overlap_comm on/off and
# communication_data_type bf16; per-collective times with a fitted alpha-beta model; and `xtrain
# plan`'s predicted step time for every run against the measured one. Not a test; needs root.
# Everything is in bench/multi_node.py (its header says how each number is made).
#   bench/multi_node.sh          # 27 minutes got through 3 of 4 links at load 5-28 (bench/RESULTS.md)
#   RATES="10gbit 1gbit" STEPS=4 bench/multi_node.sh
#   BUILD_DIR=build OUT=/tmp/multi_node bench/multi_node.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
OUT=${OUT:-$(mktemp -d /tmp/xtrain-multi-node.XXXX)}
[ -x "$BUILD_DIR/xtrain" ] || { echo "multi_node.sh: $BUILD_DIR/xtrain missing: build it first" >&2; exit 1; }
exec /usr/bin/python3 "$ROOT/bench/multi_node.py" "$BUILD_DIR" "$OUT"
