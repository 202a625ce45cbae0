#!/usr/bin/env bash
# The whole test suite from a fresh machine: install, build (tests included), run CTest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh
source scripts/env.sh
cd "$TRAINYARD_BUILD"
ctest --output-on-failure -j"${TRAINYARD_JOBS:-2}" --timeout 900
