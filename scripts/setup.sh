#!/usr/bin/env bash
# Installs what Trainyard needs on a fresh Debian 12 machine; safe to run again (idempotent). No
# system CUDA toolkit is needed: LibTorch and the CUDA toolkit its CMake package configures with
# both come from PyPI, into one venv.
#   scripts/setup.sh            the product and the test suite's tools
#   scripts/setup.sh --product  the product alone: what the quickstart builds and runs
# The product: build tools and libraries from Debian packages, and LibTorch from the PyPI torch
# wheel, in a virtual environment outside the checkout so that every clone on this machine shares
# it (override with TRAINYARD_HOME). The tests add GoogleTest, clang-format, Chromium (headless,
# for the report's browser test), Slurm and munge (the one-node cluster the Slurm tests start,
# tests/slurm/cluster.sh, with iproute2 for the two-node cluster's network namespaces — their
# services are not started here), clang with its sanitizer and
# libFuzzer runtimes (scripts/fuzz.sh), Google Benchmark, the sqlite3 shell and procps (the tests
# that signal processes), the tensorboard package in the venv (the export test reads with it), and
# MLflow in a venv of its own (the tests start its server; its many dependencies stay apart).
# Prints nothing but progress; the build reads the venv's location from scripts/env.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"

product_debs=(build-essential cmake ninja-build ccache pkg-config python3-venv git
              libyaml-cpp-dev libspdlog-dev libfmt-dev libsqlite3-dev libboost-program-options-dev
              nlohmann-json3-dev libicu-dev libturbojpeg0-dev libpng-dev libgloo-dev libssl-dev
              libcurl4-openssl-dev)
test_debs=(libgtest-dev libgmock-dev clang-format libbenchmark-dev sqlite3 chromium
           slurm-wlm munge iproute2 clang libclang-rt-14-dev procps
           binutils)  # nm and c++filt: scripts/check_file_cycles.py (CTest file_cycles)
case "${1:-}" in
  --product) debs=("${product_debs[@]}") ;;
  "") debs=("${product_debs[@]}" "${test_debs[@]}") ;;
  *) echo "setup: unknown argument '$1' (scripts/setup.sh [--product])" >&2; exit 2 ;;
esac
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$TRAINYARD_PYTHON" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TRAINYARD_TORCH_VERSION')" 2>/dev/null; then
  echo "setup: installing torch==$TRAINYARD_TORCH_VERSION (LibTorch) into $TRAINYARD_VENV"
  mkdir -p "$(dirname "$TRAINYARD_VENV")"
  [ -x "$TRAINYARD_PYTHON" ] || python3 -m venv "$TRAINYARD_VENV"
  "$TRAINYARD_PYTHON" -m pip install -q --upgrade pip
  "$TRAINYARD_PYTHON" -m pip install -q "torch==$TRAINYARD_TORCH_VERSION"
fi
# torch's CMake package configures its CUDA side with a CUDA toolkit: the torch package's own
# NVIDIA runtime packages, completed with nvcc from PyPI (no system toolkit needed; the build makes
# a view of them, cmake/torch_cuda_toolkit.cmake).
if ! "$TRAINYARD_PYTHON" -c 'import importlib.metadata as m, sys
sys.exit(any(m.version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))' \
     "${TRAINYARD_CUDA_BUILD_PACKAGES[@]}" 2>/dev/null; then
  echo "setup: installing nvcc for torch's CUDA (${TRAINYARD_CUDA_BUILD_PACKAGES[*]}) into $TRAINYARD_VENV"
  "$TRAINYARD_PYTHON" -m pip install -q --no-deps "${TRAINYARD_CUDA_BUILD_PACKAGES[@]}"
fi
# The tests read `trainyard export`'s event files with TensorBoard's own reader.
if [ "${1:-}" != --product ] &&
   ! "$TRAINYARD_PYTHON" -c "import tensorboard, sys; sys.exit(tensorboard.__version__ != '$TRAINYARD_TENSORBOARD_VERSION')" 2>/dev/null; then
  echo "setup: installing tensorboard==$TRAINYARD_TENSORBOARD_VERSION into $TRAINYARD_VENV (for the tests)"
  "$TRAINYARD_PYTHON" -m pip install -q "tensorboard==$TRAINYARD_TENSORBOARD_VERSION"
fi
# The tests start a real MLflow tracking server and read back with its client.
if [ "${1:-}" != --product ] &&
   ! "$TRAINYARD_MLFLOW_VENV/bin/python" -c "import mlflow, sys; sys.exit(mlflow.__version__ != '$TRAINYARD_MLFLOW_VERSION')" 2>/dev/null; then
  echo "setup: installing mlflow==$TRAINYARD_MLFLOW_VERSION into $TRAINYARD_MLFLOW_VENV (for the tests)"
  [ -x "$TRAINYARD_MLFLOW_VENV/bin/python" ] || python3 -m venv "$TRAINYARD_MLFLOW_VENV"
  "$TRAINYARD_MLFLOW_VENV/bin/python" -m pip install -q "mlflow==$TRAINYARD_MLFLOW_VERSION"
fi
echo "setup: ok (LibTorch $("$TRAINYARD_PYTHON" -c 'import torch; print(torch.__version__)') at $(torch_cmake_prefix))"
