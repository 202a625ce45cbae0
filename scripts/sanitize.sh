#!/usr/bin/env bash
# The whole engine under AddressSanitizer and UndefinedBehaviorSanitizer (GCC, against the LibTorch
# wheel, which is itself not instrumented) into build-asan/, then every test but the chaos and
# Slurm ones under them. Not part of scripts/test.sh: on the 2-core CI machine it costs about
# 21 minutes to build from a cold ccache and 9 minutes to test (docs/robustness.md).
#   scripts/sanitize.sh [CTEST ARGS...]   e.g. scripts/sanitize.sh -R BatchTest
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
TRAINYARD_BUILD=${TRAINYARD_ASAN_BUILD:-$root/build-asan} CMAKE_BUILD_TYPE=RelWithDebInfo \
  scripts/build.sh -DTRAINYARD_SANITIZE=ON
# allocator_may_return_null: an impossible allocation must fail as it does without ASan (LibTorch
# then reports "out of memory", which BatchTest.OutOfMemoryIsClassifiedAndNeverRetried checks);
# ASan's default aborts instead.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "${TRAINYARD_ASAN_BUILD:-$root/build-asan}"
ctest -j"${TRAINYARD_JOBS:-2}" -LE 'chaos|slurm' --timeout 900 --output-on-failure "$@"
