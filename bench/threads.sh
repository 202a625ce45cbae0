#!/usr/bin/env bash
# CPU threads: milliseconds per training step of a small DistilBERT and a small ViT for each
# runtime.threads (intra-op: 0 = the default, 1, 2) and runtime.data_workers (0, 2), with the
# machine idle and under load (one busy process per core beside the run, as when tests or another
# job share it). The settings alternate within each of R rounds; each cell is the median over the
# rounds with the range. ms/step is batch size / samples_per_s, the run's own figure over its
# training loop. Each run records the threads it used (run attribute `threads`): with 0, what the
# default chose in each round.
# Usage: bench/threads.sh [ROUNDS]   (after scripts/build.sh; ROUNDS defaults to 3). Prints Markdown.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
rounds=${1:-3}
work=$(mktemp -d)
load_pids=()
stop_load() {
  for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  load_pids=()
}
trap 'stop_load; rm -rf "$work"' EXIT
cat >"$work/distilbert.yaml" <<'YAML'
name: threads-distilbert
model: {name: distilbert, vocab_size: 1000, dim: 128, layers: 2, heads: 2, hidden_dim: 512, max_positions: 128}
dataset: {name: synthetic-text, train_size: 384, val_size: 16, test_size: 16, min_length: 120, max_length: 128, vocab_size: 1000}
train: {epochs: 1, batch_size: 16, log_every: 1000}
runtime: {accelerator: cpu}
YAML
cat >"$work/vit.yaml" <<'YAML'
name: threads-vit
model: {name: vit, image_size: 32, patch_size: 4, depth: 2, width: 128, heads: 4, mlp_dim: 512, num_classes: 10}
dataset: {name: synthetic-images, image_size: 32, train_size: 1024, val_size: 32, test_size: 32}
train: {epochs: 1, batch_size: 32, log_every: 1000}
runtime: {accelerator: cpu}
YAML
declare -A batch=([distilbert]=16 [vit]=32)
settings=("0 0" "0 2" "1 0" "1 2" "2 0" "2 2")  # threads, data_workers
# ms/step of one run: its batch over its samples_per_s; "failed" when it did not complete.
measure() {  # model threads workers
  local db="$work/$1-$2-$3-$RANDOM.db"
  if ! "$build/trainyard" run "$work/$1.yaml" --db "$db" --set runtime.threads="$2" \
    --set runtime.data_workers="$3" >"$work/last.log" 2>&1; then
    echo failed
    return
  fi
  local rate
  rate=$(sqlite3 "$db" "select value from final_metrics where key = 'samples_per_s'")
  # "ms intra-op": its ms/step, and the intra-op threads it says it used (run attribute `threads`:
  # "intra-op 2 (...), inter-op 2, data workers 2").
  local used
  used=$(sqlite3 "$db" "select value from run_attributes where key = 'threads'" |
    sed -n 's/^intra-op \([0-9]*\).*/\1/p')
  awk -v b="${batch[$1]}" -v r="$rate" -v u="${used:-?}" 'BEGIN { printf "%.0f %s", 1000 * b / r, u }'
}
declare -A results intra
for load in idle loaded; do
  if [ "$load" = loaded ]; then
    for _ in $(seq "$(nproc)"); do
      (while :; do :; done) &
      load_pids+=($!)
    done
  fi
  for round in $(seq "$rounds"); do
    for model in distilbert vit; do
      # Rotate the order each round: a drift over time lands on every setting alike.
      for i in "${!settings[@]}"; do
        setting=${settings[$(((i + round) % ${#settings[@]}))]}
        read -r threads workers <<<"$setting"
        read -r ms used <<<"$(measure "$model" "$threads" "$workers")"
        results[$load,$model,$threads,$workers]+="$ms "
        intra[$load,$model,$threads,$workers]+="${used:-?} "
      done
    done
  done
  stop_load
done
# LibTorch's version, from the torch package the build found (its version.py).
torch_version() {
  local dir
  dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt")
  sed -n "s/^__version__ = '\(.*\)'/\1/p" "$dir/../../../version.py" 2>/dev/null || echo unknown
}
# "median (min–max)" of a list of numbers, or "failed".
summary() {
  tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '
    /failed/ { failed = 1 } { v[NR] = $1 }
    END { if (failed) { print "failed"; exit }
          m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%g (%g–%g)", m, v[1], v[NR] }'
}
echo "# CPU threads: ms per training step ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD))"
echo
echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs," \
  "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); LibTorch $(torch_version)." \
  "Median of $rounds alternated rounds (min–max). Loaded: $(nproc) busy processes beside the run."
echo
echo "| model | load | runtime.threads | data_workers | ms/step | intra-op threads used, by round |"
echo "|---|---|---|---|---|---|"
for model in distilbert vit; do
  for load in idle loaded; do
    for setting in "${settings[@]}"; do
      read -r threads workers <<<"$setting"
      echo "| $model | $load | $threads | $workers | $(summary "${results[$load,$model,$threads,$workers]}") | ${intra[$load,$model,$threads,$workers]} |"
    done
  done
done
