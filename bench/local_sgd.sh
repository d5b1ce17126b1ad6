#!/usr/bin/env bash
# Local SGD (H = 4, 16) and DiLoCo (outer Nesterov, H = 4, 16) against plain data parallelism at
# equal tokens on 2 namespace nodes over a 1 Gbit/s tbf-shaped link: bytes sent, validation loss,
# wall time (issue 25, part 1). Not a test; needs root. Everything is in bench/local_sgd.py.
#   bench/local_sgd.sh                       # STEPS=64, RATE=1gbit
#   STEPS=32 ONLY=dp,avg16 bench/local_sgd.sh
#   BUILD_DIR=build OUT=/tmp/local_sgd bench/local_sgd.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
OUT=${OUT:-$(mktemp -d /tmp/xtrain-local-sgd.XXXX)}
[ -x "$BUILD_DIR/xtrain" ] || { echo "local_sgd.sh: $BUILD_DIR/xtrain missing: build it first" >&2; exit 1; }
exec /usr/bin/python3 "$ROOT/bench/local_sgd.py" "$BUILD_DIR" "$OUT"
