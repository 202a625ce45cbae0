#!/usr/bin/env bash
# Configures (once) and builds Trainyard into $TRAINYARD_BUILD (default: build/) with ccache and a
# precompiled LibTorch header. Extra arguments go to CMake's configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
jobs=${TRAINYARD_JOBS:-2}
# ccache: share hits between clones (paths relative to the checkout) and accept the precompiled
# LibTorch header.
export CCACHE_BASEDIR="$root"
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
if [ ! -f "$TRAINYARD_BUILD/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$TRAINYARD_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-Release} \
    -DCMAKE_PREFIX_PATH="$(torch_cmake_prefix)" "$@"
fi
cmake --build "$TRAINYARD_BUILD" -j"$jobs"
