#!/usr/bin/env bash
# Start-up cost of the commands and of a run, on this machine: wall time (median of N) and peak
# resident memory of each process, for
#   - `trainyard --help` and `trainyard status`: the light executable, no LibTorch;
#   - `trainyard-engine --help`: what every command cost before the split (LibTorch, CPU and CUDA);
#   - a one-step CPU run, end to end (`trainyard run`: the controller execs the engine, which
#     starts one worker);
#   - the fixed cost of a CPU run in a batch: (a batch of 6 such runs − a batch of 1) / 5, what each
#     more run costs beyond its training (its worker's start, set-up, records);
#   - the engine's rows again with libtorch_cuda preloaded into every process (LD_PRELOAD): what
#     they cost before the engine left LibTorch's CUDA side to libtrainyard_cuda.so, on this machine.
# The floor of a run's fixed cost is loading libtorch_cpu into its worker: the last row.
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
sed 's/^name: startup-bench$/name: startup-bench-6\nsweep: {repeats: 6}/' "$work/tiny.yaml" >"$work/tiny6.yaml"
"$build/trainyard" run "$work/tiny.yaml" --db "$work/status.db" >/dev/null 2>&1
echo 'int main() { return 0; }' >"$work/empty.cpp"
torch_lib="$(torch_cmake_prefix)/../../lib"
c++ "$work/empty.cpp" -o "$work/only-libtorch-cpu" -Wl,--no-as-needed -L"$torch_lib" -ltorch_cpu \
  -lc10 -Wl,-rpath,"$torch_lib"

python3 - "$n" "$build" "$work" "$torch_lib/libtorch_cuda.so" <<'PY'
import os, statistics, subprocess, sys, time
n, build, work, torch_cuda = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

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

# The rows "before" call trainyard-engine itself: LD_PRELOAD would load libtorch_cuda into the light
# `trainyard` too, which never loaded LibTorch.
def tiny_run(name, exe="trainyard"):
    return lambda i: [f"{build}/{exe}", "run", f"{work}/{name}.yaml", "--db", f"{work}/{name}-{i}-{time.time_ns()}.db"]

preloaded = dict(os.environ, LD_PRELOAD=torch_cuda)
rows = [
    ("`trainyard --help`", lambda i: [f"{build}/trainyard", "--help"], None),
    ("`trainyard status`", lambda i: [f"{build}/trainyard", "status", "--db", f"{work}/status.db"], None),
    ("`trainyard-engine --help`", lambda i: [f"{build}/trainyard-engine", "--help"], None),
    ("one-step CPU run, end to end (RSS: the controller)", tiny_run("tiny"), None),
    ("`trainyard-engine --help`, libtorch_cuda preloaded (before)", lambda i: [f"{build}/trainyard-engine", "--help"], preloaded),
    ("one-step CPU run, end to end, libtorch_cuda preloaded (before)", tiny_run("tiny", "trainyard-engine"), preloaded),
    ("an empty program linking libtorch_cpu and c10 (the floor)", lambda i: [f"{work}/only-libtorch-cpu"], None),
]
print(f"| command | wall (median of {n}) | peak RSS |")
print("|---|---|---|")
for label, argv_of, env in rows:
    wall, peak = measure(argv_of, env)
    print(f"| {label} | {wall * 1000:.0f} ms | {peak:.0f} MiB |")
for label, env, exe in (("", None, "trainyard"),
                        (", libtorch_cuda preloaded (before)", preloaded, "trainyard-engine")):
    one, _ = measure(tiny_run("tiny", exe), env)
    six, _ = measure(tiny_run("tiny6", exe), env)
    print(f"| fixed cost of one more CPU run in a batch{label}: (6 runs {six * 1000:.0f} ms − 1 run "
          f"{one * 1000:.0f} ms) / 5 | {(six - one) / 5 * 1000:.0f} ms | |")
PY
