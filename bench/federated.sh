#!/usr/bin/env bash
# Federated learning benchmark (issue 25, part 1): validation accuracy against rounds on
# Fashion-MNIST with the MLP (configs/fashion_mlp.json) for K clients, a fraction F of them per
# round, E local steps each: IID vs Dirichlet(alpha) label splits (alpha = 100, 1, 0.1), FedAvg vs
# FedProx (mu) on the non-IID splits, and secure aggregation with dropout on the IID split (the same
# model as plain FedAvg, its bytes and time). Same seed everywhere: every variant draws the same
# clients each round. Prints a table at several rounds and writes federated.svg (by hand: no
# plotting library for Debian's python3 here).
# Not a test.
#   bench/federated.sh                                   # ~6 minutes on 2 busy cores
#   ROUNDS=10 OUT=/tmp/fed bench/federated.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
XT=$BUILD_DIR/xtrain
K=${K:-20} F=${F:-0.25} E=${E:-10} ROUNDS=${ROUNDS:-30} MU=${MU:-0.1}
OUT=${OUT:-$(mktemp -d /tmp/xtrain-federated.XXXX)}
VARIANTS=${VARIANTS:-"iid dir100 dir1 dir0.1 prox_dir1 prox_dir0.1 secure_iid"}
rm -rf "$OUT" && mkdir -p "$OUT"

common=(--config "$ROOT/configs/fashion_mlp.json" --clients "$K" --fraction "$F" --local-steps "$E"
        --rounds "$ROUNDS" --seed 1 --set xtrain.eval_batches=40)
run() {  # name extra-args...
  local name=$1; shift
  echo "# $(date -u +%T) $name (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  /usr/bin/time -f "%e" -o "$OUT/$name.time" "$XT" federated "${common[@]}" --output "$OUT/$name" "$@" \
    >"$OUT/$name.log" 2>&1 || { tail -20 "$OUT/$name.log" >&2; exit 1; }
}
for v in $VARIANTS; do
  case $v in
    iid) run iid --split iid ;;
    dir*) run "$v" --split "dirichlet:${v#dir}" ;;
    prox_dir*) run "$v" --split "dirichlet:${v#prox_dir}" --prox-mu "$MU" ;;
    secure_iid) run secure_iid --split iid --secure-agg --dropout 0.2 ;;
  esac
done
/usr/bin/python3 "$ROOT/bench/federated.py" "$OUT" $VARIANTS
