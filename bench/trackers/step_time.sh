#!/usr/bin/env bash
# What `runtime.loggers` costs a training run on this machine: the same small run trained ROUNDS
# times (default 7) without a logger, with tensorboard and with mlflow (sending to a real `mlflow
# server` on 127.0.0.1, started here from the venv scripts/setup.sh makes), alternating (so drift
# falls on all alike), every step logged (train.log_every: 1, the most records a run can send),
# each into a fresh database. Prints a Markdown table: the median training samples/s and seconds
# per step of each, each one's ratio to none, and each side's spread (min–max), from the runs' own
# final figures.
# Usage: bench/trackers/step_time.sh [ROUNDS]   (after scripts/build.sh; 1.5 minutes a round)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
rounds=${1:-7}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
setsid "$TRAINYARD_MLFLOW_VENV/bin/mlflow" server --host 127.0.0.1 --port "$port" --workers 1 \
  --backend-store-uri "sqlite:///$work/mlflow.db" --artifacts-destination "$work/artifacts" \
  >"$work/server.log" 2>&1 &
server=$!
trap 'kill -KILL -- "-$server" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.2; done
export MLFLOW_TRACKING_URI=http://127.0.0.1:$port
cat >"$work/logged.yaml" <<YAML
name: logged
model: {name: vit, image_size: 32, patch_size: 4, depth: 2, width: 64, heads: 4, mlp_dim: 128, num_classes: 10}
dataset: {name: synthetic-images, train_size: 4096, val_size: 256, test_size: 256, num_classes: 10}
train: {epochs: 1, batch_size: 32, log_every: 1, seed: 1}
runtime: {accelerator: cpu, threads: 1, data_workers: 1}
YAML
for round in $(seq "$rounds"); do
  for name in none tensorboard mlflow; do
    loggers=$([ "$name" = none ] && echo "[]" || echo "[$name]")
    "$build/trainyard" run "$work/logged.yaml" --db "$work/$name-$round/t.db" \
      --set "runtime.loggers=$loggers" >"$work/$name-$round.log" 2>&1 ||
      { tail -20 "$work/$name-$round.log" >&2; exit 1; }
  done
done
# The mlflow rounds must have reached the server, or the comparison says nothing.
sent=$(sqlite3 "$work/mlflow.db" "SELECT count(*) FROM runs WHERE status = 'FINISHED'")
[ "$sent" = "$rounds" ] || { echo "MLflow has $sent finished runs, not $rounds" >&2; exit 1; }
"$TRAINYARD_PYTHON" - "$work" "$rounds" <<'PY'
import sqlite3, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def figures(name):
    out = []
    for r in range(1, rounds + 1):
        db = sqlite3.connect(f"{work}/{name}-{r}/t.db")
        final = dict(db.execute("SELECT key, value FROM final_metrics"))
        out.append((final["samples_per_s"], final["train_seconds"] / final["steps"]))
    return out
none = figures("none")
print("| loggers | samples/s (median, min–max) | ms per step (median) | / none, median of the rounds' ratios |")
print("|---|---|---|---|")
for name in ("none", "tensorboard", "mlflow"):
    rows = figures(name)
    rate = [r[0] for r in rows]
    ratio = statistics.median(t[0] / n[0] for n, t in zip(none, rows))
    print(f"| {name} | {statistics.median(rate):.0f} ({min(rate):.0f}–{max(rate):.0f}) | "
          f"{1000 * statistics.median(r[1] for r in rows):.2f} | {ratio:.3f} |")
PY
