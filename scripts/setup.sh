#!/usr/bin/env bash
# Installs everything Trainyard needs on a fresh Debian 12 machine; safe to run again (idempotent).
#   - build tools and libraries from Debian packages (and Chromium, headless, for the report's
#     browser test; Slurm and munge for the one-node cluster the Slurm tests start,
#     tests/slurm/cluster.sh — their services are not started here; clang for the sanitizer and
#     fuzzing build, scripts/fuzz.sh, with its sanitizer and libFuzzer runtimes; procps for the
#     tests that signal processes);
#   - LibTorch from the PyPI torch wheel, in a virtual environment outside the checkout so that
#     every clone on this machine shares it (override with TRAINYARD_HOME).
# Prints nothing but progress; the build reads the venv's location from scripts/env.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"

debs=(build-essential cmake ninja-build ccache pkg-config python3-venv git
      libyaml-cpp-dev libspdlog-dev libfmt-dev libsqlite3-dev sqlite3 libboost-program-options-dev
      libgtest-dev libgmock-dev clang-format nlohmann-json3-dev libbenchmark-dev libicu-dev libturbojpeg0-dev libpng-dev libgloo-dev libssl-dev chromium
      slurm-wlm munge clang libclang-rt-14-dev procps)
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
echo "setup: ok (LibTorch $("$TRAINYARD_PYTHON" -c 'import torch; print(torch.__version__)') at $(torch_cmake_prefix))"
