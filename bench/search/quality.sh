#!/usr/bin/env bash
# Trainyard's TPE against random search and Optuna's TPESampler (from PyPI, in a venv of its own):
# three functions (bench/search/tpe_quality.cpp, optuna_quality.py), the same budget of TRIALS
# trials and the same SEEDS seeds; for each, the median best value found with its quartiles, and in
# how many seeds Trainyard's TPE found a value at least as good as Optuna's. Not the same numbers —
# the same quality of result is the claim (docs/search.md).
# Usage: bench/search/quality.sh [TRIALS] [SEEDS]   (defaults 50 and 30; a few minutes, most of it
# Optuna's)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
trials=${1:-50}
seeds=${2:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S . -B "$TRAINYARD_BUILD" -DTRAINYARD_BENCH=ON >/dev/null
cmake --build "$TRAINYARD_BUILD" --target tpe_quality -j"${TRAINYARD_JOBS:-2}" >/dev/null
"$TRAINYARD_BUILD/bench/tpe_quality" "$trials" "$seeds" >"$work/results.jsonl"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q optuna
"$work/venv/bin/python" bench/search/optuna_quality.py "$trials" "$seeds" >>"$work/results.jsonl"
python3 - "$work/results.jsonl" "$trials" "$seeds" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
trials, seeds = sys.argv[2], sys.argv[3]
by = {}
for r in rows:
    by.setdefault((r["problem"], r["sampler"]), {})[r["seed"]] = r["best"]
problems = list(dict.fromkeys(r["problem"] for r in rows))
samplers = list(dict.fromkeys(r["sampler"] for r in rows))
optuna = next(s for s in samplers if s.startswith("optuna"))
print(f"Best value found in {trials} trials (lower is better; the minimum of each function is 0, "
      f"branin's 0.398), over {seeds} seeds: median [25%, 75%]\n")
print("| function | " + " | ".join(samplers) + f" | Trainyard TPE ≤ {optuna} |")
print("|---|" + "---:|" * (len(samplers) + 1))
for p in problems:
    cells = []
    for s in samplers:
        v = sorted(by[(p, s)].values())
        q = statistics.quantiles(v, n=4)
        cells.append(f"{statistics.median(v):.3g} [{q[0]:.3g}, {q[2]:.3g}]")
    ours, theirs = by[(p, "trainyard-tpe")], by[(p, optuna)]
    wins = sum(ours[k] <= theirs[k] for k in ours)
    print(f"| {p} | " + " | ".join(cells) + f" | {wins} of {len(ours)} seeds |")
PY
echo
echo "$(date -u +%Y-%m-%d), $(nproc) cores, commit $(git rev-parse --short HEAD)"
