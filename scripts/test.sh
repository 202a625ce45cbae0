#!/usr/bin/env bash
# The whole test suite from a fresh machine: install, build (tests included) and the wheel, run
# CTest; then the sanitizer build (the LibTorch-free core and its tests under ASan and UBSan,
# clang) and every fuzz target for 30 s on its corpus (scripts/fuzz.sh). TRAINYARD_FUZZ_SECONDS=0
# skips the fuzzing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh -DTRAINYARD_TESTS=ON  # on again where the quickstart configured the product alone
scripts/wheel.sh  # dist/trainyard-*.whl, which the test "wheel" installs as a user would
source scripts/env.sh
cd "$TRAINYARD_BUILD"
ctest --output-on-failure -j"${TRAINYARD_JOBS:-2}" --timeout 900
cd "$root"
seconds=${TRAINYARD_FUZZ_SECONDS:-30}
if [ "$seconds" -gt 0 ]; then scripts/fuzz.sh "$seconds"; fi
