#!/usr/bin/env bash
# What a study costs beyond its trials' training, on this machine: a random study of TRIALS
# (default 1000) trials of a trivial model (one epoch of 8 samples each, so a trial is its set-up
# in the warm engine and little else), then its report. Prints a Markdown table: the controller's
# own work per trial (proposing, resolving, reading and writing the store: the study's own line,
# measured as the study's time outside its trials' execution), the wall time per trial, the
# database's size, and the time of `trainyard report` (terminal answer and HTML).
# Usage: bench/search/study.sh [TRIALS]   (after scripts/build.sh; about 30 s for 1000 on 2 cores
# with the warm engine, 15 minutes before it, nearly all of that the trials' worker starts).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
trials=${1:-1000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/study.yaml" <<YAML
name: search-bench
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 8, heads: 2, mlp_dim: 8, num_classes: 2}
dataset: {name: synthetic-images, train_size: 8, val_size: 8, test_size: 8, num_classes: 2, image_size: 8}
train: {epochs: 1, batch_size: 8, log_every: 1000, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
sweep:
  search:
    method: random
    trials: $trials
    seed: 0
    space:
      train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-1]}
      train.optimizer.weight_decay: {uniform: [0.0, 0.2]}
      train.optimizer.beta1: {choice: [0.8, 0.9, 0.95]}
    confirm_repeats: 1
YAML
start=$(date +%s.%N)
status=0
"$build/trainyard" run "$work/study.yaml" --db "$work/study.db" >"$work/run.log" 2>&1 || status=$?
end=$(date +%s.%N)
if [ "$status" -ne 0 ]; then
  echo "the study's run failed (exit $status); its last lines:" >&2
  tail -20 "$work/run.log" >&2
  exit 1
fi
own=$(grep -o "the controller's own work: [0-9.]* ms a trial" "$work/run.log" | grep -o "[0-9.]* ms")
report_start=$(date +%s.%N)
"$build/trainyard" report --db "$work/study.db" >/dev/null
report_mid=$(date +%s.%N)
"$build/trainyard" report --db "$work/study.db" -o "$work/report.html" >/dev/null
report_end=$(date +%s.%N)
db_bytes=$(stat -c %s "$work/study.db")
html_bytes=$(stat -c %s "$work/report.html")
echo "| trials | controller's own work a trial | wall a trial | database | report (terminal) | report (HTML) |"
echo "|---:|---:|---:|---:|---:|---:|"
python3 - "$trials" "$own" "$start" "$end" "$db_bytes" "$report_start" "$report_mid" "$report_end" "$html_bytes" <<'PY'
import sys
trials, own, start, end, db, r0, r1, r2, html = sys.argv[1:]
trials = int(trials)
print(f"| {trials} | {own} | {(float(end) - float(start)) / trials * 1000:.0f} ms | "
      f"{int(db) / 1e6:.1f} MB | {float(r1) - float(r0):.1f} s | {float(r2) - float(r1):.1f} s "
      f"({int(html) / 1e6:.1f} MB) |")
PY
echo
echo "$(date -u +%Y-%m-%d), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), commit $(git rev-parse --short HEAD)"
