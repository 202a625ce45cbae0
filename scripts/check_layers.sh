#!/usr/bin/env bash
# Fails when a file includes against the layer order (ARCHITECTURE.md):
#
#   common <- config <- components/registry <- components <- runner/engine
#   db <- reports <- trackers;   runner/config (experiment files) and the run spec between;
#   runner/ on top
#
# Each project include ("dir/file.h") of each source file is checked against what its layer may
# use. Run by CTest (test "layering"); prints every offending include, file:line first.
set -euo pipefail
cd "$(dirname "$0")/.."

# The layer of a path: the most specific rule wins. The public headers (include/trainyard/, included
# as "trainyard/<name>.h") belong to the layers their implementations are in.
layer_of() {
  case "$1" in
    trainyard/error.h|trainyard/task.h|include/trainyard/error.h|include/trainyard/task.h)
      echo common ;;
    trainyard/diagnostics.h|trainyard/config_tree.h|trainyard/options.h|\
    include/trainyard/diagnostics.h|include/trainyard/config_tree.h|include/trainyard/options.h)
      echo config ;;
    trainyard/registry.h|include/trainyard/registry.h) echo registry ;;
    trainyard/*|include/trainyard/*) echo components ;;
    common/*) echo common ;;
    config/*) echo config ;;
    components/registry.*|components/plugin_loader.*|components/weights/safetensors.*)
      echo registry ;;  # no LibTorch: the core (validation reads a weights file's header)
    components/*) echo components ;;
    db/*) echo db ;;
    reports/*) echo reports ;;
    trackers/*) echo trackers ;;
    runner/config/run_spec.h | runner/config/run_options.cpp) echo run_spec ;;
    runner/config/*) echo experiment ;;
    runner/engine/*) echo engine ;;
    runner/*) echo runner ;;
    *) echo other ;;
  esac
}

# What each layer may include besides itself.
declare -A allowed=(
  [common]=""
  [config]="common"
  [registry]="common config"
  [components]="common config registry"
  [db]="common"
  [reports]="common config db"
  [trackers]="common config db reports"
  [run_spec]="common config registry"
  [experiment]="common config registry reports run_spec"
  [engine]="common config registry components run_spec"
  [runner]="common config registry components db reports trackers run_spec experiment engine"
)

failures=0
while IFS= read -r file; do
  from=$(layer_of "$file")
  [ "$from" = other ] && continue
  while IFS=: read -r line include; do
    target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$include")
    to=$(layer_of "$target")
    [ "$to" = other ] || [ "$to" = "$from" ] && continue
    if [[ " ${allowed[$from]} " != *" $to "* ]]; then
      echo "$file:$line: $from may not include $target ($to); allowed: ${allowed[$from]:-nothing}"
      failures=$((failures + 1))
    fi
  done < <(grep -n '^#include "' "$file" || true)
done < <(git ls-files --cached --others --exclude-standard -- 'include/*' 'common/*' 'config/*' 'components/*' 'db/*' 'reports/*' 'trackers/*' 'runner/*' | grep -E '\.(h|cpp)$')

# Trackers are opened behind one door (trackers/trackers.h): the files that run a batch name none.
while IFS=: read -r file line text; do
  echo "$file:$line: names a tracker ($text); open a run's trackers through BatchTrackers (trackers/trackers.h)"
  failures=$((failures + 1))
done < <(grep -inE 'mlflow|tensorboard' runner/controller.* runner/run_executor.* runner/study_runner.* || true)

# The public API (ARCHITECTURE.md, "Public API", the one list of it): the headers a component built
# outside this tree includes. Each must exist and include only public headers, so that the set
# installs whole and nothing internal leaks through it.
mapfile -t public < <(sed -n '/^## Public API/,/^## /p' ARCHITECTURE.md | grep -oE '^- `[^`]+\.h`' | sed -E 's/^- `(.*)`$/\1/')
if [ ${#public[@]} -eq 0 ]; then
  echo "ARCHITECTURE.md: no '## Public API' section listing headers as '- \`path.h\`'"
  failures=$((failures + 1))
fi
for header in "${public[@]}"; do
  if [ ! -f "$header" ]; then
    echo "ARCHITECTURE.md: public header $header does not exist"
    failures=$((failures + 1))
    continue
  fi
  while IFS=: read -r line include; do
    target=include/$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$include")
    if [[ " ${public[*]} " != *" $target "* ]]; then
      echo "$header:$line: a public header includes $target, which is not public (ARCHITECTURE.md, Public API)"
      failures=$((failures + 1))
    fi
  done < <(grep -n '^#include "' "$header" || true)
done

if [ "$failures" -gt 0 ]; then
  echo "layering: $failures problem(s): includes against the layer order or the public API"
  exit 1
fi
echo "layering: ok (${#public[@]} public headers)"
