#!/usr/bin/env bash
# Everything a lent GPU session runs, in one call: the CUDA kernels built against the machine's
# PyTorch (its LibTorch, CUDA and nvcc), checked against the CPU references, then timed.
#   1. fused AdamW (adamw_check.cpp): CUDA vs xtrain's CPU kernel; GB/s against copy bandwidth;
#   2. multi-scale attention (ms_attention_check.sh): vs the float64 reference; fwd+bwd time vs
#      dense attention and scaled_dot_product_attention at n = 1k..64k.
# Device tool:  run(command="bench/gpu/run.sh $OUT", timeout_s=540)
# Output: $OUT/*.txt. Exit status 0 when every check passed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-${OUT:-/tmp/xtrain_gpu}}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
BUILD=$(mktemp -d /tmp/xtrain_gpu.XXXXXX)
read -r TORCH_INC TORCH_API_INC TORCH_LIB ABI < <($PY - <<'PY'
import os, torch
from torch.utils import cpp_extension as c
inc = c.include_paths(device_type="cuda") if "device_type" in c.include_paths.__code__.co_varnames else c.include_paths(cuda=True)
base = [p for p in inc if p.endswith("include")][0]
print(base, os.path.join(base, "torch", "csrc", "api", "include"), c.library_paths()[0], int(torch._C._GLIBCXX_USE_CXX11_ABI))
PY
)
{
  echo "# $(date -u +%FT%TZ) torch $($PY -c 'import torch;print(torch.__version__)') $($NVCC --version | tail -1)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
} | tee "$OUT/run.txt"

status=0
# 1. fused AdamW
SRC=$ROOT/src/xtrain
build_adamw() {
  local std=$1
  "$NVCC" -gencode "arch=compute_90,code=[sm_90,compute_90]" -std=c++17 -O3 -I"$ROOT/src" \
    -c "$SRC/optim/cuda/adamw_kernel.cu" -o "$BUILD/adamw_kernel.o" || return 1
  local flags=(-std="$std" -O2 -fPIC -DXTRAIN_WITH_CUDA=1
               -D_GLIBCXX_USE_CXX11_ABI="$ABI" -I"$ROOT/src" -isystem "$TORCH_INC" -isystem "$TORCH_API_INC"
               -isystem "$CUDA_HOME/include")
  for s in "$ROOT/bench/gpu/adamw_check.cpp" "$SRC/optim/cuda/adamw_cuda.cpp" "$SRC/optim/cpu/kernels.cpp"; do
    g++ "${flags[@]}" -c "$s" -o "$BUILD/$(basename "$s").o" || return 1
  done
  g++ -o "$BUILD/adamw_check" "$BUILD"/*.o -L"$TORCH_LIB" -Wl,-rpath,"$TORCH_LIB" \
    -Wl,--no-as-needed -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda -Wl,--as-needed \
    -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart -lpthread
}
if build_adamw c++17 > "$BUILD/adamw17.log" 2>&1 || { rm -f "$BUILD"/*.o; build_adamw c++20 > "$BUILD/adamw20.log" 2>&1; }; then
  "$BUILD/adamw_check" 2>&1 | tee "$OUT/adamw_check.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
else
  echo "adamw_check: build failed" | tee "$OUT/adamw_check.txt"
  cat "$BUILD"/adamw*.log | tail -40
  status=2
fi

# 2. multi-scale attention
"$ROOT/bench/gpu/ms_attention_check.sh" "$OUT" || status=$(( status == 0 ? 1 : status ))
echo "# exit $status" | tee -a "$OUT/run.txt"
exit "$status"
