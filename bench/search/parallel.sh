#!/usr/bin/env bash
# Trials side by side (sweep.search.parallel): the wall time of a random study of TRIALS (default
# 16) trials of a small ViT at parallel 1 and 2, each ROUNDS (default 3) times in alternation, every
# time in a fresh database, with runtime.threads 0 (the machine chooses: all CPUs for one trial,
# half each for two). Prints a Markdown table: median wall time (min–max), the median trial's
# training time, and the speedup of parallel 2 over 1.
#
# On this machine (`trainyard run`), or with --slurm on a one-node Slurm cluster started here
# (tests/slurm/cluster.sh; root, slurm-wlm) with 3 CPUs: `trainyard submit --slurm`, timed from the
# submission until the study's job has left the queue. At parallel 1 the study's job trains every
# trial itself (its warm engine, its CPUs); at parallel 2 it asks for each trial's job with srun
# (one CPU each, its own process), two at once beside it.
# Usage: [SAMPLES=1024] bench/search/parallel.sh [--slurm] [TRIALS] [ROUNDS]
#   (after scripts/build.sh; minutes; SAMPLES: each trial's training samples, its length)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
slurm=false
if [ "${1:-}" = --slurm ]; then
  slurm=true
  shift
fi
trials=${1:-16}
rounds=${2:-3}
samples=${SAMPLES:-1024}  # training samples: a trial's length
work=$(mktemp -d)
if $slurm; then
  bash tests/slurm/cluster.sh start "$work/cluster" 3 >/dev/null
  export SLURM_CONF="$work/cluster/slurm.conf"
  trap 'scancel --me 2>/dev/null || true; bash tests/slurm/cluster.sh stop "$work/cluster"; rm -rf "$work"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
study() {  # PARALLEL
  cat <<YAML
name: parallel-bench
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 64, heads: 4, mlp_dim: 128, num_classes: 4}
dataset: {name: synthetic-images, train_size: $samples, val_size: 256, test_size: 64, num_classes: 4, image_size: 16}
train: {epochs: 2, batch_size: 32, log_every: 1000, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 0, data_workers: 0}
sweep:
  search:
    method: random
    trials: $trials
    seed: 0
    parallel: $1
    space:
      train.optimizer.lr: {log_uniform: [1.0e-4, 1.0e-2]}
      train.optimizer.weight_decay: {uniform: [0.0, 0.2]}
    confirm_repeats: 0
YAML
}
for parallel in 1 2; do study "$parallel" >"$work/p$parallel.yaml"; done
: >"$work/times"
for round in $(seq "$rounds"); do
  for parallel in 1 2; do
    db="$work/r$round-p$parallel/t.db"
    mkdir -p "$(dirname "$db")"
    start=$(date +%s.%N)
    if $slurm; then
      "$build/trainyard" submit "$work/p$parallel.yaml" --slurm --db "$db" >"$work/run.log" 2>&1 ||
        { cat "$work/run.log" >&2; exit 1; }
      job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["job_id"])' \
        "$(dirname "$db")/slurm/submission-1/studies.json")
      while [ -n "$(squeue -h -j "$job" 2>/dev/null)" ]; do sleep 0.1; done
      end=$(date +%s.%N)
      scancel --me  # the report job: not part of the study
      "$build/trainyard" collect --db "$db" >>"$work/run.log" 2>&1
      [ "$(sqlite3 "$db" "SELECT COUNT(*) FROM study_outcomes")" = 1 ] ||
        { cat "$work/run.log" "$(dirname "$db")"/slurm/submission-1/slurm-study0-*.out >&2; exit 1; }
    else
      "$build/trainyard" run "$work/p$parallel.yaml" --db "$db" >"$work/run.log" 2>&1 ||
        { tail -20 "$work/run.log" >&2; exit 1; }
      end=$(date +%s.%N)
    fi
    train=$(sqlite3 "$db" "SELECT value FROM final_metrics WHERE key = 'train_seconds' ORDER BY value" |
      awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
    echo "$parallel $(echo "$end - $start" | bc) $train" >>"$work/times"
  done
done
how='`trainyard run`'
$slurm && how='`trainyard submit --slurm` on a one-node Slurm cluster of 3 CPUs, until the study'"'"'s job ended'
python3 - "$work/times" "$trials" "$rounds" "$how" "$samples" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
trials, rounds = sys.argv[2], sys.argv[3]
by = {}
for parallel, wall, train in rows:
    by.setdefault(parallel, []).append((float(wall), float(train)))
how = sys.argv[4]
print(f"A random study of {trials} trials of {sys.argv[5]} samples, {rounds} rounds in alternation: wall time of "
      f"{how} (median, min–max) and the median trial's train_seconds\n")
print("| parallel | wall time | a trial trains | speedup over parallel 1 |")
print("|---:|---:|---:|---:|")
base = statistics.median(w for w, _ in by["1"])
for parallel in sorted(by):
    walls = [w for w, _ in by[parallel]]
    middle = statistics.median(walls)
    train = statistics.median(t for _, t in by[parallel])
    print(f"| {parallel} | {middle:.1f} s ({min(walls):.1f}–{max(walls):.1f}) | {train:.2f} s | "
          f"{base / middle:.2f}x |")
PY
echo
echo "$(date -u +%Y-%m-%d), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), commit $(git rev-parse --short HEAD)"
