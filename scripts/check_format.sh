#!/usr/bin/env bash
# Fails when a C++ file of the tree differs from what clang-format makes of it (.clang-format at the
# root). Run by CTest (test "formatting"); prints each file's first differences. To fix them all:
#   git ls-files '*.h' '*.cpp' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
format=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$format" ]; then
  echo "formatting: clang-format not found; scripts/setup.sh installs it"
  exit 1
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.h' '*.cpp')
failures=0
for file in "${files[@]}"; do
  [ -f "$file" ] || continue
  if ! "$format" --style=file "$file" | diff -u --label "$file" --label "$file (clang-format)" "$file" - >/tmp/format.$$ 2>&1; then
    head -20 /tmp/format.$$
    failures=$((failures + 1))
  fi
done
rm -f /tmp/format.$$
if [ "$failures" -gt 0 ]; then
  echo "formatting: $failures file(s) differ from clang-format; run: git ls-files '*.h' '*.cpp' | xargs $format -i"
  exit 1
fi
echo "formatting: ok (${#files[@]} files)"
