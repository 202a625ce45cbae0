#!/usr/bin/env bash
# What `runtime.loggers: [tensorboard]` costs a training run on this machine: the same small run
# trained ROUNDS times (default 7) without and with the logger, alternating (so drift falls on both
# alike), every step logged (train.log_every: 1, the most records a run can send), each into a
# fresh database. Prints a Markdown table: the median training samples/s and seconds per step of
# each, their ratio, and each side's spread (min–max), from the runs' own final figures.
# Usage: bench/trackers/step_time.sh [ROUNDS]   (after scripts/build.sh; about a minute a round)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
rounds=${1:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/logged.yaml" <<YAML
name: logged
model: {name: vit, image_size: 32, patch_size: 4, depth: 2, width: 64, heads: 4, mlp_dim: 128, num_classes: 10}
dataset: {name: synthetic-images, train_size: 4096, val_size: 256, test_size: 256, num_classes: 10}
train: {epochs: 1, batch_size: 32, log_every: 1, seed: 1}
runtime: {accelerator: cpu, threads: 1, data_workers: 1}
YAML
for round in $(seq "$rounds"); do
  for loggers in "[]" "[tensorboard]"; do
    name=$([ "$loggers" = "[]" ] && echo none || echo tensorboard)
    "$build/trainyard" run "$work/logged.yaml" --db "$work/$name-$round/t.db" \
      --set "runtime.loggers=$loggers" >"$work/$name-$round.log" 2>&1 ||
      { tail -20 "$work/$name-$round.log" >&2; exit 1; }
  done
done
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
none, tb = figures("none"), figures("tensorboard")
print("| loggers | samples/s (median, min–max) | ms per step (median) |")
print("|---|---|---|")
for name, rows in (("none", none), ("tensorboard", tb)):
    rate = [r[0] for r in rows]
    print(f"| {name} | {statistics.median(rate):.0f} ({min(rate):.0f}–{max(rate):.0f}) | "
          f"{1000 * statistics.median(r[1] for r in rows):.2f} |")
ratio = statistics.median(t[0] / n[0] for n, t in zip(none, tb))
print(f"\ntensorboard / none, samples/s, median of the {rounds} rounds' ratios: {ratio:.3f}")
PY
