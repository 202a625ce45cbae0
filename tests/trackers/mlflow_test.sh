#!/usr/bin/env bash
# MLflow through its REST API, against a real `mlflow server` (SQLite backend, artifacts proxied),
# read back with MLflow's own client (tests/trackers/check_mlflow.py):
#   1. a batch of three variants logs live (runtime.loggers: [mlflow]); the server is killed once
#      the first run is FINISHED on it, while the second trains: the batch goes on and ends as it would (exit 1: the broken
#      variant fails), its runs' logs and its console say what could not be sent;
#   2. `trainyard export --mlflow` while the server is down fails, saying so;
#   3. the server comes back (same database); `trainyard export --mlflow` sends what it lacks, and
#      every run, param, tag, status, metric point and report equals the database, each once;
#   4. exporting again sends nothing, and nothing is doubled.
#   tests/trackers/mlflow_test.sh TRAINYARD_EXE
set -euo pipefail
trainyard=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mlflow_python=$TRAINYARD_MLFLOW_VENV/bin/python
[ -x "$mlflow_python" ] || { echo "no MLflow at $TRAINYARD_MLFLOW_VENV: run scripts/setup.sh"; exit 1; }
work=$(mktemp -d)
server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -KILL -- "-$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
trap 'stop_server; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
uri=http://127.0.0.1:$port
start_server() {  # in a process group of its own, so that killing it kills its workers
  setsid "$TRAINYARD_MLFLOW_VENV/bin/mlflow" server --host 127.0.0.1 --port "$port" --workers 1 \
    --backend-store-uri "sqlite:///$work/mlflow.db" --artifacts-destination "$work/artifacts" \
    >> "$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    curl -sf "$uri/health" > /dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; fail "mlflow server exited"; }
    sleep 0.2
  done
  cat "$work/server.log"
  fail "mlflow server did not answer within 120 s"
}

mkdir -p "$work/broken-cifar"
for name in data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin \
            data_batch_5.bin test_batch.bin; do
  head -c 100 /dev/zero > "$work/broken-cifar/$name"
done
cat > "$work/tracked.yaml" <<YAML
name: tracked
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}
train: {epochs: 2, batch_size: 16, log_every: 2, val_every_steps: 3, seed: 1}
runtime: {accelerator: cpu, threads: 1, data_workers: 0, loggers: [mlflow]}
sweep:
  variants:
    - {name: fp32}
    - {name: low-lr, set: {train.optimizer.lr: 1.0e-4, train.epochs: 45, dataset.train_size: 1024, train.log_every: 16, train.val_every_steps: 40}}
    - {name: broken, set: {dataset: {name: cifar10, root: $work/broken-cifar}, model.image_size: 32, model.num_classes: 10}}
YAML

echo "== without MLFLOW_TRACKING_URI the batch is refused before it starts"
set +e
env -u MLFLOW_TRACKING_URI "$trainyard" run "$work/tracked.yaml" --db "$work/runs/t.db" > "$work/refused.log" 2>&1
status=$?
set -e
[ "$status" = 2 ] || { cat "$work/refused.log"; fail "exit $status without MLFLOW_TRACKING_URI, not 2"; }
grep -q "MLFLOW_TRACKING_URI is not set" "$work/refused.log" || { cat "$work/refused.log"; fail "no word of MLFLOW_TRACKING_URI"; }

echo "== a batch logging live; the server killed once the first run is FINISHED on it"
start_server
set +e
MLFLOW_TRACKING_URI=$uri "$trainyard" run "$work/tracked.yaml" --db "$work/runs/t.db" > "$work/run.log" 2>&1 &
batch=$!
set -e
finished=0
for _ in $(seq 1200); do
  finished=$(sqlite3 "$work/mlflow.db" "SELECT count(*) FROM runs WHERE status = 'FINISHED'" 2>/dev/null || echo 0)
  [ "$finished" -ge 1 ] && break
  kill -0 "$batch" 2>/dev/null || break
  sleep 0.1
done
[ "$finished" -ge 1 ] || { cat "$work/run.log"; fail "no run FINISHED on the server while the batch ran"; }
stop_server
# The long second run must still be training, so that its sends fail while it trains.
running=$(sqlite3 "$work/runs/t.db" "SELECT count(*) FROM runs WHERE variant = 'low-lr' AND status = 'running'")
[ "$running" = 1 ] || { cat "$work/run.log"; fail "low-lr was not training when the server went (too slow a machine?)"; }
set +e
wait "$batch"
status=$?
set -e
[ "$status" = 1 ] || { cat "$work/run.log"; fail "the batch exited $status, not 1 (only the broken variant fails)"; }
completed=$(sqlite3 "$work/runs/t.db" "SELECT count(*) FROM runs WHERE status = 'completed'")
[ "$completed" = 2 ] || { cat "$work/run.log"; fail "$completed runs completed, not 2"; }
grep -q "MLflow: not sent in full" "$work/run.log" || { cat "$work/run.log"; fail "the batch did not say what it could not send"; }
grep -l "MLflow: cannot reach" "$work"/runs/logs/*/*.log > /dev/null 2>&1 ||
  { cat "$work/run.log"; fail "no run's log says MLflow could not be reached"; }

echo "== export while the server is down: refused, saying so"
set +e
"$trainyard" export --db "$work/runs/t.db" --mlflow "$uri" > "$work/down.log" 2>&1
status=$?
set -e
[ "$status" = 2 ] || { cat "$work/down.log"; fail "export to a stopped server exited $status, not 2"; }
grep -q "cannot reach" "$work/down.log" || { cat "$work/down.log"; fail "export did not say it could not reach the server"; }

echo "== the server back: export sends what it lacks, and again sends nothing"
start_server
"$trainyard" export --db "$work/runs/t.db" --mlflow "$uri" | tee "$work/export1.log"
"$mlflow_python" "$root/tests/trackers/check_mlflow.py" "$work/runs/t.db" "$uri"
"$trainyard" export --db "$work/runs/t.db" --mlflow "$uri" | tee "$work/export2.log"
grep -q "(0 new; 0 metric points, 0 params sent)" "$work/export2.log" || fail "the second export sent something again"
"$mlflow_python" "$root/tests/trackers/check_mlflow.py" "$work/runs/t.db" "$uri"
echo "ok"
