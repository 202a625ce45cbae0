#!/usr/bin/env bash
# Studies (sweep.search: successive halving with two trials side by side, and asha) in MLflow,
# against a real `mlflow server`, read back with MLflow's own client
# (tests/trackers/check_mlflow_study.py, check_mlflow.py):
#   1. logged live (runtime.loggers: [mlflow]), two trials side by side (a sender per slot): the
#      study is one parent run with its trials as children, tagged with study, trial and rung; the
#      paused trials FINISHED, not KILLED; the decisions and the best trial on the parent;
#   2. the same study exported after the fact (`trainyard export --mlflow`), the same way, beside
#      one whose every trial diverged: it ended, with no best trial, so its parent is FAILED;
#   3. TensorBoard's export puts each study's trials in the study's folder (check_exports.py reads
#      every run back with TensorBoard's own reader);
#   4. exporting again sends nothing.
#   tests/trackers/mlflow_study_test.sh TRAINYARD_EXE
set -euo pipefail
trainyard=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mlflow_python=$TRAINYARD_MLFLOW_VENV/bin/python
[ -x "$mlflow_python" ] || { echo "no MLflow at $TRAINYARD_MLFLOW_VENV: run scripts/setup.sh"; exit 1; }
work=$(mktemp -d)
server_pid=""
trap '[ -z "$server_pid" ] || kill -KILL -- "-$server_pid" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
uri=http://127.0.0.1:$port
setsid "$TRAINYARD_MLFLOW_VENV/bin/mlflow" server --host 127.0.0.1 --port "$port" --workers 1 \
  --backend-store-uri "sqlite:///$work/mlflow.db" --artifacts-destination "$work/artifacts" \
  >> "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do
  curl -sf "$uri/health" > /dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; fail "mlflow server exited"; }
  sleep 0.2
done
curl -sf "$uri/health" > /dev/null || fail "mlflow server did not answer within 120 s"

study() {  # NAME LOGGERS PARALLEL SCHEDULE [LEARNING RATES]
  cat <<YAML
name: $1
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}
train: {epochs: 4, batch_size: 16, seed: 5, log_every: 100, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 1, data_workers: 0, loggers: $2}
sweep:
  variants: [{name: fp32}]
  search:
    method: random
    trials: 6
    seed: 3
    parallel: $3
    space: {train.optimizer.lr: {log_uniform: ${5:-[1.0e-4, 3.0e-2]}}}
    schedule: {name: $4, grace_epochs: 1, reduction: 3}
    confirm_repeats: 1
YAML
}
study live "[mlflow]" 2 successive-halving > "$work/live.yaml"  # a sender per slot, one parent
study exported "[]" 1 asha > "$work/exported.yaml"
study diverged "[]" 1 asha "[1.0e+30, 1.0e+32]" > "$work/diverged.yaml"  # NaN from the first step

echo "== a study logged live"
MLFLOW_TRACKING_URI=$uri "$trainyard" run "$work/live.yaml" --db "$work/runs/s.db" > "$work/live.log" 2>&1 ||
  { cat "$work/live.log"; fail "the live study failed"; }
grep -q "go on to epoch" "$work/live.log" || { cat "$work/live.log"; fail "no trial was promoted"; }
"$mlflow_python" "$root/tests/trackers/check_mlflow_study.py" "$work/runs/s.db" "$uri"

echo "== a study exported after the fact"
"$trainyard" run "$work/exported.yaml" --db "$work/runs/s.db" > "$work/exported.log" 2>&1 ||
  { cat "$work/exported.log"; fail "the exported study failed"; }
"$trainyard" run "$work/diverged.yaml" --db "$work/runs/s.db" > "$work/diverged.log" 2>&1 ||
  { cat "$work/diverged.log"; fail "the diverged study's run failed"; }
grep -q "no trial reached" "$work/diverged.log" || { cat "$work/diverged.log"; fail "a trial did not diverge"; }
"$trainyard" export --db "$work/runs/s.db" --mlflow "$uri" | tee "$work/export1.log"
"$mlflow_python" "$root/tests/trackers/check_mlflow_study.py" "$work/runs/s.db" "$uri"
"$mlflow_python" "$root/tests/trackers/check_mlflow.py" "$work/runs/s.db" "$uri"

echo "== TensorBoard: each study's trials in its study's folder, read back by TensorBoard's reader"
"$trainyard" export --db "$work/runs/s.db" --tensorboard "$work/tensorboard"
[ "$(ls "$work/tensorboard/exported/fp32-study" | wc -l)" = 6 ] ||
  { ls -R "$work/tensorboard"; fail "the exported study's folder does not hold its 6 trials"; }
"$TRAINYARD_PYTHON" "$root/tests/trackers/check_exports.py" "$work/runs/s.db" "$work/tensorboard" -

echo "== exporting again sends nothing"
"$trainyard" export --db "$work/runs/s.db" --mlflow "$uri" | tee "$work/export2.log"
grep -q "(0 new; 0 metric points, 0 params sent)" "$work/export2.log" || fail "the second export sent something again"
echo "ok"
