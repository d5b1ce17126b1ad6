#!/usr/bin/env bash
# Builds and runs bench/gpu/ms_attention_check.cpp on a machine with a GPU and PyTorch 2.x (its
# LibTorch, CUDA and nvcc): the CUDA multi-scale attention kernel checked against the float64
# reference, then timed against dense attention. Builds only the few sources it needs (no CMake
# configure of the whole tree, whose optional packages a bare GPU image may lack).
#   bench/gpu/ms_attention_check.sh [OUT_DIR]     (device tool: bench/gpu/ms_attention_check.sh $OUT)
# Exit status: the check program's (0 all checks passed, 1 a check failed); build errors exit 2.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-${OUT:-/tmp/ms_attention_check}}
BUILD=$(mktemp -d /tmp/ms_check.XXXXXX)
mkdir -p "$OUT"
PY=${PYTHON:-python3}
read -r TORCH_INC TORCH_API_INC TORCH_LIB ABI < <($PY - <<'PY'
import os, torch
from torch.utils import cpp_extension as c
inc = c.include_paths(device_type="cuda") if "device_type" in c.include_paths.__code__.co_varnames else c.include_paths(cuda=True)
base = [p for p in inc if p.endswith("include")][0]
print(base, os.path.join(base, "torch", "csrc", "api", "include"), c.library_paths()[0], int(torch._C._GLIBCXX_USE_CXX11_ABI))
PY
)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
echo "# $(date -u +%FT%TZ) torch $($PY -c 'import torch;print(torch.__version__)') nvcc $($NVCC --version | tail -1)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

SRC="$ROOT/src/xtrain"
CXX_SOURCES=("$ROOT/bench/gpu/ms_attention_check.cpp" "$SRC/kernels/ms_attention/cuda/ms_attention_cuda.cpp"
             "$SRC/kernels/ms_attention/reference.cpp" "$SRC/kernels/ms_attention/windows.cpp"
             "$SRC/kernels/attention/dense_reference.cpp")
build() {
  local std=$1 objs=()
  "$NVCC" -gencode "arch=compute_90,code=[sm_90,compute_90]" -std=c++17 -O3 -I"$ROOT/src" \
    -c "$SRC/kernels/ms_attention/cuda/ms_attention_kernel.cu" -o "$BUILD/kernel.o"
  objs+=("$BUILD/kernel.o")
  for s in "${CXX_SOURCES[@]}"; do
    local o="$BUILD/$(basename "$s").o"
    g++ -std="$std" -O2 -fPIC -DXTRAIN_WITH_CUDA=1 -D_GLIBCXX_USE_CXX11_ABI="$ABI" -I"$ROOT/src" -isystem "$TORCH_INC" \
      -isystem "$TORCH_API_INC" -isystem "$CUDA_HOME/include" -c "$s" -o "$o" &
    objs+=("$o")
  done
  wait
  g++ -o "$BUILD/ms_attention_check" "${objs[@]}" -L"$TORCH_LIB" -Wl,-rpath,"$TORCH_LIB" \
    -Wl,--no-as-needed -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda -Wl,--as-needed \
    -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart -lpthread
}
# LibTorch 2.x headers want C++17 (older) or C++20 (newer): try in that order.
if ! build c++17 > "$BUILD/build17.log" 2>&1; then
  build c++20 > "$BUILD/build20.log" 2>&1 || { cat "$BUILD"/build*.log; exit 2; }
fi
set +e
"$BUILD/ms_attention_check" 2>&1 | tee "$OUT/ms_attention_check.txt"
status=${PIPESTATUS[0]}
exit "$status"
