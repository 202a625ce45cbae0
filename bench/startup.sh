#!/usr/bin/env bash
# Start-up cost of the commands and of a run, on this machine: wall time (median of N) and peak
# resident memory of each process, for
#   - `trainyard --help` and `trainyard status`: the light executable, no LibTorch;
#   - `trainyard-engine --help`: what every command cost before the split (LibTorch, CPU and CUDA);
#   - a one-step CPU run, end to end (`trainyard run`: the controller execs the engine, which
#     starts one worker): the fixed cost every run pays.
# Usage: bench/startup.sh [N]   (after scripts/build.sh; N defaults to 10). Prints a Markdown table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
n=${1:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/tiny.yaml" <<'YAML'
name: startup-bench
model: {name: vit, image_size: 32, patch_size: 8, depth: 1, width: 8, heads: 2, mlp_dim: 8, num_classes: 10}
dataset: {name: synthetic-images, train_size: 64, val_size: 64, test_size: 64}
train: {epochs: 1, batch_size: 64, log_every: 1000}
runtime: {accelerator: cpu}
YAML
"$build/trainyard" run "$work/tiny.yaml" --db "$work/status.db" >/dev/null

python3 - "$n" "$build" "$work" <<'PY'
import os, statistics, subprocess, sys, time
n, build, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def measure(argv_of):
    """Median wall time and median peak RSS (MiB) of argv_of(i) over n runs; the RSS is the
    started process's own (os.wait4), not its children's."""
    walls, rss = [], []
    for i in range(n):
        argv = argv_of(i)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"startup.sh: {' '.join(argv)} failed")
        rss.append(usage.ru_maxrss / 1024)
    return statistics.median(walls), statistics.median(rss)

tiny_run = lambda i: [f"{build}/trainyard", "run", f"{work}/tiny.yaml", "--db", f"{work}/run{i}.db"]
rows = [
    ("`trainyard --help`", lambda i: [f"{build}/trainyard", "--help"]),
    ("`trainyard status`", lambda i: [f"{build}/trainyard", "status", "--db", f"{work}/status.db"]),
    ("`trainyard-engine --help`", lambda i: [f"{build}/trainyard-engine", "--help"]),
    ("one-step CPU run, end to end (RSS: the controller)", tiny_run),
]
print(f"| command | wall (median of {n}) | peak RSS |")
print("|---|---|---|")
for label, argv_of in rows:
    wall, peak = measure(argv_of)
    print(f"| {label} | {wall * 1000:.0f} ms | {peak:.0f} MiB |")
PY
