#!/usr/bin/env bash
# The sanitizer and fuzzing build: the LibTorch-free core, its tests and the fuzz targets under
# fuzz/, compiled by clang with AddressSanitizer and UndefinedBehaviorSanitizer into build-fuzz/.
#   scripts/fuzz.sh [SECONDS]   core_tests under the sanitizers, then every fuzz target for SECONDS
#                               (default 30) on a copy of its corpus (fuzz/corpus/<target>/)
# TRAINYARD_FUZZ_TARGETS="safetensors_fuzz wordpiece_fuzz" picks targets. A crash, leak, hang
# (10 s) or allocation over 2 GB fails the script and leaves the input that caused it (printed).
# Targets run TRAINYARD_JOBS (2) at a time. scripts/test.sh runs it with 30 s per target; fuzz
# longer by hand: scripts/fuzz.sh 600.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-30}
jobs=${TRAINYARD_JOBS:-2}
build=${TRAINYARD_FUZZ_BUILD:-$root/build-fuzz}
export CCACHE_BASEDIR="$root"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTRAINYARD_CORE_ONLY=ON -DTRAINYARD_FUZZ=ON >/dev/null
fi
cmake --build "$build" -j"$jobs"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "fuzz.sh: core_tests under ASan and UBSan"
if ! (cd "$build" && ctest -j"$jobs" --output-on-failure --timeout 300 >"$build/sanitized-tests.log" 2>&1); then
  grep -vE "^ *(Start|[0-9]+/[0-9]+ Test)" "$build/sanitized-tests.log" | tail -80
  echo "fuzz.sh: core_tests failed under the sanitizers (log: $build/sanitized-tests.log)"
  exit 1
fi
tail -n 3 "$build/sanitized-tests.log" | head -n 1

targets=${TRAINYARD_FUZZ_TARGETS:-$(ls fuzz/corpus)}
work=$(mktemp -d "${TMPDIR:-/tmp}/trainyard-fuzz.XXXXXX")
# One target: SECONDS of fuzzing on one core, its summary (or, on failure, its log's end and the
# input) into $work/<target>.summary; the exit status says which.
fuzz_target() {
  local target=$1
  mkdir -p "$work/$target" "$work/$target-artifacts"
  if ! "$build/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$work/$target-artifacts/" "$work/$target" "fuzz/corpus/$target" \
      >"$work/$target.log" 2>&1; then
    { tail -60 "$work/$target.log"
      echo "fuzz.sh: $target failed; the input: $(ls "$work/$target-artifacts"/* 2>/dev/null | head -1)"
    } >"$work/$target.summary"
    return 1
  fi
  echo "fuzz.sh: $target for ${seconds}s: $(grep -E "stat::number_of_executed_units|stat::new_units_added" \
    "$work/$target.log" | tr '\n' ' ')" >"$work/$target.summary"
}
# The targets $jobs at a time (each fuzzer is one process on one core), each for its full SECONDS.
failed=""
running=0
for target in $targets; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_target "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
for target in $targets; do cat "$work/$target.summary"; done
if [ -n "$failed" ]; then
  echo "fuzz.sh: a target failed (above); its inputs stay in $work"
  exit 1
fi
rm -rf "$work"
echo "fuzz.sh: ok"
