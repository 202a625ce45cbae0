#!/usr/bin/env bash
# Trainyard's two-objective search (MOTPE) against random search and Optuna's multi-objective
# samplers (TPESampler, NSGAIISampler; from PyPI, in a venv of its own): two functions
# (bench/search/pareto_quality.cpp, optuna_pareto.py), the same budget of TRIALS trials and the
# same SEEDS seeds; for each, the median hypervolume of the Pareto front found (higher is better)
# with its quartiles, and in how many seeds Trainyard's MOTPE found a front at least as good as
# Optuna's TPE's. The same quality of result is the claim, not the same numbers (docs/search.md).
# Usage: bench/search/pareto.sh [TRIALS] [SEEDS]   (defaults 60 and 20; a few minutes, most of it
# Optuna's)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
trials=${1:-60}
seeds=${2:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S . -B "$TRAINYARD_BUILD" -DTRAINYARD_BENCH=ON >/dev/null
cmake --build "$TRAINYARD_BUILD" --target pareto_quality -j"${TRAINYARD_JOBS:-2}" >/dev/null
"$TRAINYARD_BUILD/bench/pareto_quality" "$trials" "$seeds" >"$work/results.jsonl"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q optuna
"$work/venv/bin/python" bench/search/optuna_pareto.py "$trials" "$seeds" >>"$work/results.jsonl"
python3 - "$work/results.jsonl" "$trials" "$seeds" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
trials, seeds = sys.argv[2], sys.argv[3]
by = {}
for r in rows:
    by.setdefault((r["problem"], r["sampler"]), {})[r["seed"]] = r["hv"]
problems = list(dict.fromkeys(r["problem"] for r in rows))
samplers = list(dict.fromkeys(r["sampler"] for r in rows))
optuna = next(s for s in samplers if s.startswith("optuna") and s.endswith("-tpe"))
print(f"Hypervolume of the Pareto front found in {trials} trials (higher is better), over {seeds} "
      f"seeds: median [25%, 75%]\n")
print("| function | " + " | ".join(samplers) + f" | Trainyard MOTPE ≥ {optuna} |")
print("|---|" + "---:|" * (len(samplers) + 1))
for p in problems:
    cells = []
    for s in samplers:
        v = sorted(by[(p, s)].values())
        q = statistics.quantiles(v, n=4)
        cells.append(f"{statistics.median(v):.4g} [{q[0]:.4g}, {q[2]:.4g}]")
    ours, theirs = by[(p, "trainyard-motpe")], by[(p, optuna)]
    wins = sum(ours[k] >= theirs[k] for k in ours)
    print(f"| {p} | " + " | ".join(cells) + f" | {wins} of {len(ours)} seeds |")
PY
echo
echo "$(date -u +%Y-%m-%d), $(nproc) cores, commit $(git rev-parse --short HEAD)"
