#!/usr/bin/env bash
# Per-step communication volume of ddp, zero2 and fsdp on ViT-B/16 and DistilBERT at full size,
# counted by the engine (comm_bytes_per_step) on two Gloo ranks, and the per-rank training state.
# About 3 minutes on a 2-core CPU once built (scripts/build.sh). Prints a Markdown table; commit it
# under bench/results/ with the date and the machine. docs/scaling.md is built on these figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/trainyard run bench/comm/communication.yaml --db "$work/comm.db" >"$work/run.log" 2>&1 ||
  { tail -30 "$work/run.log"; exit 1; }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; commit $(git rev-parse --short HEAD)"
echo
echo "| run | parameters | comm bytes/step | / (4 x parameters) | param bytes/rank | grad bytes/rank | optimizer bytes/rank |"
echo "|---|---:|---:|---:|---:|---:|---:|"
sqlite3 -separator ' | ' "$work/comm.db" "
  SELECT '| ' || r.variant,
         printf('%.1fM', MAX(CASE WHEN m.key = 'parameters' THEN m.value END) / 1e6),
         printf('%.1f MB', MAX(CASE WHEN m.key = 'comm_bytes_per_step' THEN m.value END) / 1e6),
         printf('%.2f', MAX(CASE WHEN m.key = 'comm_bytes_per_step' THEN m.value END) /
                        (4 * MAX(CASE WHEN m.key = 'parameters' THEN m.value END))),
         printf('%.1f MB', MAX(CASE WHEN m.key = 'param_bytes_per_rank' THEN m.value END) / 1e6),
         printf('%.1f MB', MAX(CASE WHEN m.key = 'grad_bytes_per_rank' THEN m.value END) / 1e6),
         printf('%.1f MB', MAX(CASE WHEN m.key = 'optimizer_state_bytes_per_rank' THEN m.value END) / 1e6) || ' |'
  FROM runs r JOIN final_metrics m ON m.run_id = r.id
  WHERE r.status = 'completed' GROUP BY r.id ORDER BY r.id"
