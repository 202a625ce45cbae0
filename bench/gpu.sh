#!/usr/bin/env bash
# GPU benchmark on the H200 machine (../shared/device/README.md), in stages, within its limits: at
# most 8 files come back from $OUT (flat here), 12,000 characters of output, 10 minutes a command,
# and the machine goes back 30 s after a call (a second call starts bare and builds again).
#
# Here, first:   ../shared/device/pack libicu-dev libicu72 libturbojpeg0-dev libturbojpeg0 libpng-dev libpng16-16 libgloo-dev zlib1g-dev zlib1g
#                (about 35 MB of packages; FindPNG needs zlib's header. A local check of the device
#                build — `bash .devdeps/build.sh -DCMAKE_IGNORE_PREFIX_PATH=/usr ...` with a python3
#                that imports torch — unpacks .devdeps/root: delete it before the call, the carry
#                holds 64 MiB)
# Device call:   carry [".devdeps"], timeout_s 560, command: bash bench/gpu.sh   (it tees its own
#                output to $OUT/log: do not pipe it through tee again); then give_back at once
# Rehearsal:     bash bench/gpu.sh --rehearse   (here, on the CPU build: the same stages with tiny
#                steps, leaving in $OUT — default /tmp/trainyard-gpu-rehearsal — exactly the files a
#                device call does, so their layout is checked before device time is spent; about
#                5-6 minutes on this 2-core machine, measured 2026-12-01: 4 m 58 s and 6 m 08 s)
#
# Stages, in order (all but study by default; name some to run only those):
#   smoke       does the CUDA path run at all: first the GPU tests (tests/gpu: the feed's stream
#               runs ahead of the step, and a batch's memory is not reused while the step reads it;
#               seconds), then bench/gpu/smoke.yaml — ViT and DistilBERT (2 blocks each), every
#               precision, eager and CUDA graphs, 6 steps each under sync_debug: error; then
#               bench/gpu/micro_batch.yaml — GPT-2 (2 blocks) at a batch of 512 with
#               train.micro_batch_size: auto, eager and CUDA graphs (2 runs)
#   sync        bench/gpu/sync_check.yaml: the full models under runtime.sync_debug: error, eager and
#               CUDA-graph pairs whose losses must agree (whole batches and micro-batches), and
#               dynamic padding
#   throughput  bench/gpu/{vit,distilbert}_throughput.yaml: 24 short runs (2 x 16 steps each);
#               bench/gpu/gpt2_throughput.yaml: GPT-2 124M at context 1024, bf16, tokens/s and MFU
#               (4 runs, after the others: the first cut when time runs short)
#   baselines   the same steps in PyTorch eager and Lightning Fabric on the machine's python3
#   study       (only when named) the two studies' full 3-epoch runs on synthetic data of their sizes
#   summary     bench/gpu/compare.py: the comparison, as summary.md
# Every stage that runs trainyard builds it (and the GPU tests) first when build-gpu/ lacks them.
#
# What comes back ($OUT, 7 files): log (everything printed), environment.txt, summary.md, trainyard.md
# (trainyard's own report), gpu.db, logs.tar.gz (every run's logs, without checkpoints),
# baselines.json. The database and logs live in $WORK (default /dev/shm/trainyard-gpu where it has
# 16 GiB free, else /tmp/trainyard-gpu) and are copied back after every batch, so a call cut short still
# returns what finished.
#
# Plan for 15 device minutes, from what can be measured here: a cold build here takes about 8
# minutes on 2 cores with the tests (measured), about half without them; on the device's 16 cores
# expect 2-3 minutes (scaled, not measured). A smoke run here is 3 s per run on the CPU (measured:
# 20 runs in 59 s, tiny batches); on the GPU, process start-up and CUDA initialisation dominate:
# expect 2-4 s a run, so smoke ends 3-4 minutes into the call. Then sync (8 runs, about 1 minute),
# throughput (24 runs, 3-5 minutes: each run also builds the full model and checkpoints at each
# epoch's end) and baselines (12 configurations in two frameworks, about 2 minutes): about 10-13
# minutes in all, more than one call holds. So the stages keep to a deadline (GPU_SH_SECONDS,
# below): what does not fit is skipped or stopped cleanly, and the summary of what finished always
# comes back.
#   Call 1 (timeout_s 560; its start costs a minute or two more): all default stages, then
#   give_back at once (an idle machine costs device time).
#   Call 2 only when 4 minutes or more are left (a fresh machine builds again; fewer are refused):
#   after a build failure (call 1 then ends within minutes and runs nothing else) the fix, or the
#   stages call 1 did not reach, named: `GPU_SH_SECONDS=<left - 60> bash bench/gpu.sh sync summary`.
#   The studies' full runs (`study`) fit only a session of their own.
# Commit $OUT's files under bench/results/gpu-<date>/ with the date, GPU, driver, LibTorch, CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."

rehearse=false
if [ "${1:-}" = "--rehearse" ]; then
  rehearse=true
  shift
fi
if $rehearse; then
  out=${OUT:-/tmp/trainyard-gpu-rehearsal}
  binary=build/trainyard
  gpu_tests=build/tests/gpu/gpu_tests  # they skip on the CPU: the rehearsal checks they start
  # The same experiments on the CPU, a couple of tiny steps each (CUDA graphs and the sync check
  # need a GPU: refused on the CPU at validation, so turned off here).
  overrides=(--set runtime.accelerator=cpu --set runtime.compile=none --set runtime.sync_debug=off
             --set train.batch_size=2 --set train.limit_train_batches=2 --set train.epochs=1)
else
  out=${OUT:-bench/results/gpu-local}
  binary=build-gpu/trainyard
  gpu_tests=build-gpu/tests/gpu/gpu_tests
  overrides=()
fi
# In memory where there is room (16 GiB free: a container's /dev/shm may hold only 64 MB): every run
# writes a checkpoint at each epoch's end (about 1 GB for ViT-B/16 with Adam in fp32), and a disk's
# fsyncs would cost the call seconds a run.
shm_free_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }' || true)
if [ -z "${WORK:-}" ] && [ -w /dev/shm ] && [ "${shm_free_kb:-0}" -gt $((16 * 1024 * 1024)) ]; then
  WORK=/dev/shm/trainyard-gpu
fi
work=${WORK:-/tmp/trainyard-gpu}
mkdir -p "$out" "$work"
exec > >(tee "$out/log") 2>&1  # the call's output tail is cut at 12,000 characters; the log is whole
tee_pid=$!
db="$work/gpu.db"
stages=${*:-smoke sync throughput baselines summary}
wants() { [[ " $stages " == *" $1 "* ]]; }
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }
# The call's time: stages stop by GPU_SH_SECONDS after the start (default 510 s: a call's
# timeout_s of 540 or more leaves the rest for the summary and the copies). A stage with under 30 s
# left is skipped; each trainyard batch gets --time-limit with what is left, so it stops cleanly,
# marking the run it is in as interrupted, and what finished is collected and summarised.
deadline=$((start + ${GPU_SH_SECONDS:-$($rehearse && echo 1500 || echo 510)}))
seconds_left() { echo $((deadline - $(date +%s))); }
time_for() {  # time_for WHAT: whether 30 s or more are left for it; says so when not
  [ "$(seconds_left)" -ge 30 ] && return 0
  stamp "out of time: $1 skipped"
  return 1
}

# The carried Debian libraries and LibTorch's, for trainyard and the GPU tests only: python3's own
# modules (sqlite3 in compare.py) keep the system's libraries.
libs=""
if ! $rehearse && [ -d .devdeps ]; then
  site=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  libs="$PWD/.devdeps/root/usr/lib/x86_64-linux-gnu:$site/torch/lib"
fi
with_libs() { LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

# Builds trainyard and the GPU tests when they are missing. A failed build is tried once: the
# stages that need the binary are then skipped, and the baselines and the summary still run.
build_failed=false
ensure_binary() {
  $build_failed && return 1
  [ -x "$binary" ] && [ -x "$gpu_tests" ] && return 0
  stamp "build"
  if $rehearse; then
    scripts/build.sh
  else
    bash .devdeps/build.sh -DTRAINYARD_TESTS=OFF -DTRAINYARD_GPU_TESTS=ON
  fi || {
    build_failed=true
    stamp "build failed (above): the stages that need trainyard are skipped"
    return 1
  }
}

# What finished so far, back to $OUT: the database and one tarball of the logs.
collect() {
  [ -f "$db" ] && sqlite3 "$db" ".backup '$out/gpu.db'" 2>/dev/null || { [ -f "$db" ] && cp "$db" "$out/gpu.db"; }
  # Without checkpoints: an interrupted run keeps one (about a GB), over what a call brings back.
  [ -d "$work/logs" ] && tar -czf "$out/logs.tar.gz" --exclude='*.state' -C "$work" logs
  return 0
}
train() {  # train FILE: a failed run is recorded in the database; the stage goes on
  time_for "$1" || return 0
  local left
  left=$(seconds_left)
  stamp "trainyard: $1 (--time-limit ${left}s)"
  # timeout: a backstop, should the batch not stop at its time limit (a hung capture)
  with_libs timeout -k 15 $((left + 30)) "$binary" run "$1" --db "$db" --time-limit "${left}s" \
    "${overrides[@]}" || true
  collect
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "stages: $stages$($rehearse && echo ' (rehearsal on the CPU)')"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
    sed 's/^/gpu: /' || echo "gpu: none"
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda:", torch.version.cuda)' 2>/dev/null ||
    echo "torch: not importable by python3"
  command -v nvcc > /dev/null && nvcc --version | tail -1 | sed 's/^/nvcc: /'
  python3 -c 'import importlib.metadata as m
for name in ("lightning", "torchvision", "transformers"):
    try:
        print(f"{name}: {m.version(name)}")
    except m.PackageNotFoundError:
        print(f"{name}: not installed")' 2>/dev/null || true
  echo "cmake: $(cmake --version 2>/dev/null | head -1)"
  echo "c++: $(c++ --version 2>/dev/null | head -1)"
  echo "cpu: $(nproc) cores"
  echo "work: $work"
} > "$out/environment.txt"
cat "$out/environment.txt"

if wants smoke && ensure_binary; then
  stamp "GPU tests (tests/gpu)"
  with_libs timeout -k 10 180 "$gpu_tests" 2>&1 | tee "$work/gpu_tests.log" || true
  stamp "smoke: every precision, eager and CUDA graphs, under runtime.sync_debug: error"
  train bench/gpu/smoke.yaml
  train bench/gpu/micro_batch.yaml
fi

if wants sync && ensure_binary; then
  stamp "host synchronisation check (runtime.sync_debug: error)"
  # A small CIFAR-10 in the binary format (random pixels; 200 images a file) for the real image
  # path: the CIFAR-10 reader, crop-flip and ImageNet normalisation on the GPU.
  python3 - <<'PY'
import os, random
root = "/tmp/trainyard-bench/cifar-10-batches-bin"
os.makedirs(root, exist_ok=True)
rng = random.Random(0)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(os.path.join(root, name), "wb") as f:
        for _ in range(200):
            f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
PY
  train bench/gpu/sync_check.yaml
fi

if wants throughput && ensure_binary; then
  train bench/gpu/vit_throughput.yaml
  train bench/gpu/distilbert_throughput.yaml
  train bench/gpu/gpt2_throughput.yaml
fi

if wants study && ensure_binary; then
  train bench/gpu/study_vit.yaml
  train bench/gpu/study_distilbert.yaml
fi

# After a failed build, the call ends at once: its log says why, and the device time left is for
# the fix and a second call (the baselines alone give no ratio).
if wants baselines && $build_failed; then
  stamp "baselines skipped: the build failed"
elif wants baselines && time_for baselines; then
  stamp "baselines: PyTorch eager and Lightning Fabric (at most $(seconds_left)s)"
  if $rehearse; then
    # The venv's python has the torch wheel (not Lightning: its configurations record the error).
    source scripts/env.sh
    "$TRAINYARD_PYTHON" bench/gpu/baselines.py --device cpu --quick --out "$out/baselines.json" ||
      echo "baselines: failed (see above)"
  else
    # Each configuration's figures are written as it ends: a cut-short stage keeps what finished.
    timeout -k 10 "$(seconds_left)" python3 bench/gpu/baselines.py --out "$out/baselines.json" ||
      echo "baselines: failed or cut short (see above)"
  fi
fi

if wants summary; then
  [ -x "$binary" ] && [ -f "$db" ] && { with_libs "$binary" report --db "$db" -o "$out/trainyard.md" || true; }
  [ -f "$out/baselines.json" ] || echo "[]" > "$out/baselines.json"
  if $build_failed; then
    echo "**The build failed**: nothing ran on the GPU; the log says why." > "$out/summary.md"
  elif [ -f "$out/gpu.db" ]; then
    python3 bench/gpu/compare.py "$out/gpu.db" "$out/baselines.json" > "$out/summary.md" ||
      echo "summary: compare.py failed (see above)" > "$out/summary.md"
  else
    echo "No trainyard run was recorded (the stages run: $stages)." > "$out/summary.md"
  fi
  if [ -f "$work/gpu_tests.log" ]; then  # the GPU tests' verdicts, from the smoke stage
    { echo; echo "## GPU tests (tests/gpu)"; echo
      { grep -E '^\[ +(OK|FAILED|SKIPPED) +\] .* \([0-9]+ ms\)$|^\[=+\] .* ran' "$work/gpu_tests.log" || echo "(no verdict: see the log)"; } | sed 's/^/    /'
    } >> "$out/summary.md"
  fi
  cat "$out/summary.md"
fi
collect
rm -f "$out/baselines.json.tmp"  # what a cut-short baseline left: not a result
stamp "done; in $out: $(ls "$out" | tr '\n' ' ')"
exec >&- 2>&-  # the log's last lines reach it before the call ends
wait "$tee_pid" 2>/dev/null || true
