#!/usr/bin/env bash
# One study, side by side: Trainyard against Optuna (from PyPI) on the same tiny training. Both
# train a tiny ViT (32x32 images, patches of 8, width 32, depth 2) with AdamW on the same
# CIFAR-10-format files (written here: 800 training images, the last 200 held out for validation,
# of 10 classes a small network can tell apart), search lr and weight decay with TPE over TRIALS
# trials of EPOCHS epochs, halve at epoch 1 and 3 (Trainyard's successive-halving with grace 1 and
# reduction 3; Optuna's SuccessiveHalvingPruner, min_resource 1, reduction 3), then train the best
# settings again on 2 fresh seeds. Each tool runs once per seed, the tools alternated, on 2 threads.
# Prints a Markdown table: median wall time of the whole study (a Python user's includes importing
# torch), median best val_acc of the search and median val_acc of the confirmation runs at their
# last epoch — the same quality, not the same numbers, is the claim (docs/search.md).
# Usage: bench/search/vs_optuna.sh [SEEDS] [TRIALS] [EPOCHS]   (defaults 5, 12, 3; after
# scripts/build.sh; a few minutes)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
seeds=${1:-5}
trials=${2:-12}
epochs=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$TRAINYARD_PYTHON" -m pip install -q --target "$work/optuna" optuna >/dev/null

# The data: each class a colour and a stripe direction, with noise; CIFAR-10's binary records.
"$TRAINYARD_PYTHON" - "$work/data" <<'PY'
import sys
from pathlib import Path
import numpy as np
out = Path(sys.argv[1]); out.mkdir()
rng = np.random.default_rng(0)
def records(count):
    labels = rng.integers(0, 10, count)
    ys, xs = np.mgrid[0:32, 0:32]
    images = np.empty((count, 3, 32, 32), np.float32)
    for i, label in enumerate(labels):
        colour = np.array([(label * 37) % 255, (label * 91) % 255, (label * 53) % 255]) / 255
        stripes = np.sin((xs if label % 2 else ys) * (1 + label // 2) * 0.4)
        images[i] = colour[:, None, None] * (0.6 + 0.3 * stripes) + rng.normal(0, 0.6, (3, 32, 32))
    pixels = np.clip(images * 255, 0, 255).astype(np.uint8).reshape(count, -1)
    return np.concatenate([labels.astype(np.uint8)[:, None], pixels], 1).tobytes()
for i in range(1, 6):
    (out / f"data_batch_{i}.bin").write_bytes(records(160))
(out / "test_batch.bin").write_bytes(records(200))
PY

study_file() {  # SEED
  cat <<YAML
name: vs-optuna-$1
model: {name: vit, image_size: 32, patch_size: 8, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 10}
dataset: {name: cifar10, root: $work/data, val_size: 200}
train: {epochs: $epochs, batch_size: 64, seed: $1, log_every: 1000, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 2, data_workers: 0}
sweep:
  search:
    method: tpe
    trials: $trials
    seed: $1
    space:
      train.optimizer.lr: {log_uniform: [1.0e-4, 1.0e-2]}
      train.optimizer.weight_decay: {uniform: [0.0, 0.1]}
    metric: val_acc
    schedule: {name: successive-halving, grace_epochs: 1, reduction: 3}
    confirm_repeats: 2
YAML
}

for seed in $(seq 1 "$seeds"); do
  study_file "$seed" >"$work/study-$seed.yaml"
  start=$(date +%s.%N)
  "$build/trainyard" run "$work/study-$seed.yaml" --db "$work/study-$seed.db" >"$work/run-$seed.log" 2>&1 ||
    { tail -20 "$work/run-$seed.log" >&2; exit 1; }
  end=$(date +%s.%N)
  "$TRAINYARD_PYTHON" - "$work/study-$seed.db" "$seed" "$start" "$end" "$epochs" >>"$work/results.jsonl" <<'PY'
import json, sqlite3, statistics, sys
db, seed, start, end, epochs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
c = sqlite3.connect(db)
best = c.execute("SELECT figure FROM study_outcomes").fetchone()[0]
trial_runs = {r for (r,) in c.execute("SELECT run_id FROM study_trials")}
confirmed = [v for run, v in c.execute(
    "SELECT run_id, value FROM epoch_metrics WHERE key = 'val_acc' AND epoch = ?", (epochs,))
    if run not in trial_runs]
print(json.dumps({"tool": "trainyard", "seed": seed, "seconds": end - start, "best": best,
                  "confirmed": statistics.median(confirmed)}))
PY
  PYTHONPATH="$work/optuna" "$TRAINYARD_PYTHON" bench/search/vs_optuna.py "$work/data" "$seed" \
    "$trials" "$epochs" 2 2 >>"$work/results.jsonl"
done

"$TRAINYARD_PYTHON" - "$work/results.jsonl" "$seeds" "$trials" "$epochs" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
seeds, trials, epochs = sys.argv[2:5]
print(f"| {trials}-trial TPE study, {epochs} epochs, halving at 1 and 3, 2 confirmation runs "
      f"({seeds} seeds) | wall (median) | best val_acc (median) | confirmed val_acc (median) |")
print("|---|---|---|---|")
for tool in dict.fromkeys(r["tool"] for r in rows):
    mine = [r for r in rows if r["tool"] == tool]
    median = lambda key: statistics.median(r[key] for r in mine)
    walls = ", ".join(f"{r['seconds']:.1f}" for r in mine)
    print(f"| {tool} (each: {walls} s) | {median('seconds'):.1f} s | {median('best') * 100:.1f}% "
          f"| {median('confirmed') * 100:.1f}% |")
PY
