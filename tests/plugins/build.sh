#!/usr/bin/env bash
# What the plugin tests start from, made as docs/plugins.md tells a user to: the SDK installed from
# BUILD into OUT/sdk, then each example under examples/plugins/ and the broken plugins here built
# as separate CMake projects against it (OUT/<name>/lib<name>.so).
#   tests/plugins/build.sh BUILD OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)  # absolute: each project is configured from its own folder
rm -rf "$out/sdk"
cmake --install "$build" --prefix "$out/sdk" >/dev/null
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
configure_and_build() {  # SOURCE NAME
  cmake -S "$1" -B "$out/$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$out/sdk" \
    "${launcher[@]}" >"$out/$2.log" 2>&1 || { cat "$out/$2.log"; exit 1; }
  cmake --build "$out/$2" -j2 >>"$out/$2.log" 2>&1 || { cat "$out/$2.log"; exit 1; }
}
for example in "$root"/examples/plugins/*/; do
  configure_and_build "$example" "$(basename "$example")"
done
configure_and_build "$root/tests/plugins" bad
