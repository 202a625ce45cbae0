#!/usr/bin/env bash
# The CPU quickstart from a fresh machine: install what the product needs, build the product
# alone (no test suite: scripts/test.sh adds it), train experiments/quickstart.yaml and write its
# report. Prints where the database and the report are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh --product
scripts/build.sh -DTRAINYARD_TESTS=OFF
source scripts/env.sh
db=runs/quickstart.db
"$TRAINYARD_BUILD/trainyard" run experiments/quickstart.yaml --db "$db"
"$TRAINYARD_BUILD/trainyard" report --db "$db" -o runs/quickstart-report.html
echo
echo "database: $root/$db"
echo "report:   $root/runs/quickstart-report.html"
