#!/usr/bin/env bash
# Start-up cost of the commands and of a run, on this machine: wall time (median of N) and peak
# resident memory of each process, for
#   - `trainyard --help` and `trainyard status`: the light executable, no LibTorch;
#   - `trainyard-engine --help`: LibTorch's CPU side loaded;
#   - a one-step CPU run, end to end (`trainyard run`: the controller execs the engine, which
#     starts one worker);
#   - an empty program linking libtorch_cpu: the floor of a process that loads LibTorch;
#   - the fixed cost of a CPU run in a batch: (a batch of 100 one-step runs − a batch of 1) / 99,
#     what each more run costs beyond its training (set-up, records, and with --fresh-engine its
#     worker's start), with the warm engine (the default) and with --fresh-engine (median of 3);
#     and of a 2-rank ddp run, whose ranks always start fresh: (6 runs − 1) / 5;
#   - the warm engine's memory across a batch of 200 such runs: each run's peak RSS as it recorded
#     it (peak_rss_bytes, the worker's kernel high-water mark, reset at each run's start), early
#     runs against the last ones: flat when nothing leaks.
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
sed -e 's/^runtime: {accelerator: cpu}$/runtime: {accelerator: cpu, strategy: ddp, devices: 2}/' \
  -e 's/batch_size: 64/batch_size: 32/' "$work/tiny.yaml" >"$work/ddp.yaml"  # one step of 2 x 32
sed "s/^name: startup-bench\$/name: startup-bench-ddp6\nsweep: {repeats: 6}/" "$work/ddp.yaml" >"$work/ddp6.yaml"
for runs in 100 200; do
  sed "s/^name: startup-bench\$/name: startup-bench-$runs\nsweep: {repeats: $runs}/" "$work/tiny.yaml" \
    >"$work/tiny$runs.yaml"
done
"$build/trainyard" run "$work/tiny.yaml" --db "$work/status.db" >/dev/null 2>&1
echo 'int main() { return 0; }' >"$work/empty.cpp"
torch_lib="$(torch_cmake_prefix)/../../lib"
c++ "$work/empty.cpp" -o "$work/only-libtorch-cpu" -Wl,--no-as-needed -L"$torch_lib" -ltorch_cpu \
  -lc10 -Wl,-rpath,"$torch_lib"

python3 - "$n" "$build" "$work" <<'PY'
import os, sqlite3, statistics, subprocess, sys, time
n, build, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def measure(argv_of, env=None):
    """Median wall time and median peak RSS (MiB) of argv_of(i) over n runs; the RSS is the
    started process's own (os.wait4), not its children's."""
    walls, rss = [], []
    for i in range(n):
        argv = argv_of(i)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"startup.sh: {' '.join(argv)} failed")
        rss.append(usage.ru_maxrss / 1024)
    return statistics.median(walls), statistics.median(rss)

def tiny_run(name, exe="trainyard"):
    return lambda i: [f"{build}/{exe}", "run", f"{work}/{name}.yaml", "--db", f"{work}/{name}-{i}-{time.time_ns()}.db"]

rows = [
    ("`trainyard --help`", lambda i: [f"{build}/trainyard", "--help"]),
    ("`trainyard status`", lambda i: [f"{build}/trainyard", "status", "--db", f"{work}/status.db"]),
    ("`trainyard-engine --help`", lambda i: [f"{build}/trainyard-engine", "--help"]),
    ("one-step CPU run, end to end (RSS: the controller)", tiny_run("tiny")),
    ("an empty program linking libtorch_cpu and c10 (the floor)", lambda i: [f"{work}/only-libtorch-cpu"]),
]
print(f"| command | wall (median of {n}) | peak RSS |")
print("|---|---|---|")
for label, argv_of in rows:
    wall, peak = measure(argv_of)
    print(f"| {label} | {wall * 1000:.0f} ms | {peak:.0f} MiB |")

def batch_wall(name, extra):
    """Median wall time of 3 batches of `name`."""
    walls = []
    for i in range(3):
        argv = tiny_run(name)(i) + extra
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)

one = batch_wall("tiny", [])
for label, extra in (("warm engine", []), ("--fresh-engine", ["--fresh-engine"])):
    hundred = batch_wall("tiny100", extra)
    print(f"| fixed cost of one more CPU run in a batch, {label}: (100 runs {hundred:.2f} s − "
          f"1 run {one:.2f} s) / 99 | {(hundred - one) / 99 * 1000:.0f} ms | |")

# Multi-rank runs start their ranks fresh (ARCHITECTURE.md, "A warm engine", says why).
one_ddp, six_ddp = batch_wall("ddp", []), batch_wall("ddp6", [])
print(f"| fixed cost of one more 2-rank ddp run in a batch (fresh ranks): (6 runs {six_ddp:.2f} s − "
      f"1 run {one_ddp:.2f} s) / 5 | {(six_ddp - one_ddp) / 5 * 1000:.0f} ms | |")

# The warm engine's memory over 200 runs, from what each run recorded.
db = f"{work}/rss200.db"
subprocess.run([f"{build}/trainyard", "run", f"{work}/tiny200.yaml", "--db", db],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
rows = sqlite3.connect(db).execute(
    "SELECT r.id, f.value, a.value FROM runs r JOIN final_metrics f ON f.run_id = r.id "
    "AND f.key = 'peak_rss_bytes' LEFT JOIN run_attributes a ON a.run_id = r.id "
    "AND a.key = 'engine process' ORDER BY r.id").fetchall()
rss = [value / 2**20 for _, value, _ in rows]
fresh = sum(1 for _, _, process in rows if process == "fresh")
print(f"| peak RSS of the warm worker, runs 2–21 (median) | | {statistics.median(rss[1:21]):.1f} MiB |")
print(f"| peak RSS of the warm worker, runs 181–200 (median) | | {statistics.median(rss[-20:]):.1f} MiB |")
print(f"| peak RSS of the warm worker, greatest of the 200 runs | | {max(rss):.1f} MiB |")
print(f"| runs of the 200 that started a fresh process | {fresh} | |")
PY
