#!/usr/bin/env bash
# The CPU quickstart from a fresh machine: install, build, train experiments/quickstart.yaml and
# write its report. Prints where the database and the report are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh
source scripts/env.sh
db=runs/quickstart.db
"$TRAINYARD_BUILD/trainyard" run experiments/quickstart.yaml --db "$db"
"$TRAINYARD_BUILD/trainyard" report --db "$db" -o runs/quickstart-report.html
echo
echo "database: $root/$db"
echo "report:   $root/runs/quickstart-report.html"
