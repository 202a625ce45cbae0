#!/usr/bin/env bash
# runtime.loggers: [tensorboard] — event files written while the runs train — read back by
# TensorBoard's own reader (tests/trackers/check_exports.py) and compared with the database: two
# variants, the batch killed (SIGKILL: its workers die with it) during the first, steps after that
# run's last checkpoint, and continued by the same command, which trains those steps again. Every
# scalar must equal the database's, once at its step: one line in TensorBoard, in one event file a
# run.
#   tests/trackers/live_test.sh TRAINYARD_EXE
set -euo pipefail
trainyard=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
db="$work/runs/t.db"

cat > "$work/live.yaml" <<YAML
name: live
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 4096, val_size: 64, test_size: 64, num_classes: 4, image_size: 16}
train: {epochs: 2, batch_size: 16, log_every: 8, val_every_steps: 40, checkpoint_every_steps: 25, seed: 1}
runtime: {accelerator: cpu, threads: 1, data_workers: 0, loggers: [tensorboard]}
sweep:
  variants:
    - {name: fp32}
    - {name: low-lr, set: {train.optimizer.lr: 1.0e-4}}
YAML

"$trainyard" run "$work/live.yaml" --db "$db" > "$work/first.log" 2>&1 &
pid=$!
# Killed once its first run has checkpointed (steps 25 and 50) and recorded steps after that.
for _ in $(seq 600); do
  steps=$(sqlite3 "$db" "SELECT COALESCE(MAX(step), 0) FROM step_metrics" 2>/dev/null || echo 0)
  [ "${steps:-0}" -ge 70 ] && break
  sleep 0.1
done
kill -KILL "$pid"
set +e
wait "$pid"
status=$?
set -e
if [ "$status" != 137 ]; then
  cat "$work/first.log"
  echo "the batch exited $status before it was killed: make the runs longer"
  exit 1
fi
"$trainyard" run "$work/live.yaml" --db "$db" > "$work/second.log" 2>&1 || {
  cat "$work/second.log"; exit 1; }
resumes=$(sqlite3 "$db" "SELECT MAX(resumes) FROM runs")
if [ "$resumes" != 1 ]; then
  cat "$work/first.log" "$work/second.log"
  echo "no run continued from its checkpoint (resumes $resumes)"
  exit 1
fi
# The terminal says where the event files go, and how to open them.
if ! grep -q "TensorBoard: event files in $work/runs/tensorboard/.* (tensorboard --logdir $work/runs/tensorboard)" "$work/second.log"; then
  cat "$work/second.log"
  echo "the run did not say where its event files went"
  exit 1
fi
"$TRAINYARD_PYTHON" "$root/tests/trackers/check_exports.py" "$db" "$work/runs/tensorboard" -
